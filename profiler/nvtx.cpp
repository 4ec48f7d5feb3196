#include "profiler/nvtx.h"

#include <array>
#include <mutex>
#include <unordered_map>

#if MACTUNE_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace mactune::prof {
namespace {

constexpr std::array kPhases = {Phase::step, Phase::rope,   Phase::append, Phase::match,
                                Phase::plan, Phase::attend, Phase::merge,  Phase::ring_write};
static_assert(static_cast<int>(Phase::ring_write) + 1 == kPhases.size(),
              "kPhases must list every Phase (kernels/phase.h)");

}  // namespace

std::string nvtx_message(Phase phase, std::string_view instance) {
  std::string m(name_of(phase));
  if (!instance.empty()) {
    m += '/';
    m += instance;
  }
  return m;
}

bool parse_nvtx_message(std::string_view message, std::string* phase, std::string* instance) {
  const auto slash = message.find('/');
  const std::string_view head = message.substr(0, slash);
  for (Phase p : kPhases) {
    if (name_of(p) != head) continue;
    if (phase) *phase = std::string(head);
    if (instance)
      *instance =
          slash == std::string_view::npos ? std::string() : std::string(message.substr(slash + 1));
    return true;
  }
  return false;
}

#if MACTUNE_HAVE_NVTX

namespace {

nvtxDomainHandle_t domain() {
  static const nvtxDomainHandle_t d = nvtxDomainCreateA("mactune");  // null without a tool
  return d;
}

// Registered strings live as long as the domain (the process): intern each message once.
nvtxStringHandle_t registered_string(const std::string& message) {
  static std::mutex mutex;
  static std::unordered_map<std::string, nvtxStringHandle_t> handles;
  std::lock_guard lock(mutex);
  auto it = handles.find(message);
  if (it == handles.end())
    it = handles.emplace(message, nvtxDomainRegisterStringA(domain(), message.c_str())).first;
  return it->second;
}

std::uint32_t phase_color(Phase p) {  // ARGB, one hue per phase
  switch (p) {
    case Phase::step:
      return 0xff5f6b7a;
    case Phase::rope:
      return 0xff8e7cc3;
    case Phase::append:
      return 0xff6fa8dc;
    case Phase::match:
      return 0xfff6b26b;
    case Phase::plan:
      return 0xffffd966;
    case Phase::attend:
      return 0xff76b900;
    case Phase::merge:
      return 0xffe06666;
    case Phase::ring_write:
      return 0xff45818e;
  }
  return 0xff999999;
}

nvtxEventAttributes_t attributes() {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  return a;
}

// Per thread and phase: the instance of the last range and its registered string, so the
// steady state costs a string compare, not a lock.
struct CachedString {
  std::string instance;
  nvtxStringHandle_t handle = nullptr;
};
thread_local std::array<CachedString, kPhases.size()> phase_strings;

}  // namespace

bool nvtx_compiled() {
  return true;
}
bool nvtx_tool_attached() {
  return domain() != nullptr;
}

NvtxPhaseSink::NvtxPhaseSink(std::string default_instance)
    : domain_(domain()), default_instance_(std::move(default_instance)) {}

void NvtxPhaseSink::begin(Phase phase, std::string_view instance) {
  if (!domain_) return;
  if (instance.empty()) instance = default_instance_;
  CachedString& c = phase_strings[static_cast<std::size_t>(phase)];
  if (!c.handle || c.instance != instance) {
    c.handle = registered_string(nvtx_message(phase, instance));
    c.instance = instance;
  }
  nvtxEventAttributes_t a = attributes();
  a.colorType = NVTX_COLOR_ARGB;
  a.color = phase_color(phase);
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = c.handle;
  nvtxDomainRangePushEx(static_cast<nvtxDomainHandle_t>(domain_), &a);
}

void NvtxPhaseSink::end(Phase) {
  if (!domain_) return;
  nvtxDomainRangePop(static_cast<nvtxDomainHandle_t>(domain_));
}

NvtxRange::NvtxRange(std::string_view message, std::int64_t payload, bool registered) {
  const nvtxDomainHandle_t d = domain();
  if (!d) return;
  const std::string text(message);
  nvtxEventAttributes_t a = attributes();
  if (registered) {
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = registered_string(text);
  } else {
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = text.c_str();
  }
  if (payload >= 0) {
    a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
    a.payload.llValue = payload;
  }
  nvtxDomainRangePushEx(d, &a);
  pushed_ = true;
}

NvtxRange::~NvtxRange() {
  if (pushed_) nvtxDomainRangePop(domain());
}

void nvtx_mark(std::string_view message) {
  const nvtxDomainHandle_t d = domain();
  if (!d) return;
  const std::string text(message);
  nvtxEventAttributes_t a = attributes();
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = text.c_str();
  nvtxDomainMarkEx(d, &a);
}

#else  // no NVTX headers: nothing to call

bool nvtx_compiled() {
  return false;
}
bool nvtx_tool_attached() {
  return false;
}
NvtxPhaseSink::NvtxPhaseSink(std::string) : domain_(nullptr) {}
void NvtxPhaseSink::begin(Phase, std::string_view) {}
void NvtxPhaseSink::end(Phase) {}
NvtxRange::NvtxRange(std::string_view, std::int64_t, bool) {}
NvtxRange::~NvtxRange() = default;
void nvtx_mark(std::string_view) {}

#endif

}  // namespace mactune::prof
