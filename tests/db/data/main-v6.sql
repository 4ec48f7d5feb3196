PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE schema_version ( version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL);
INSERT INTO schema_version VALUES(1,'devices, builds, instances, workloads, runs, measurements, decisions, fidelity, nsys','2026-12-02T17:08:41.171Z');
INSERT INTO schema_version VALUES(2,'nsys: memcpy/memset rows, launch times and range rows of kernels','2026-12-02T17:08:41.197Z');
INSERT INTO schema_version VALUES(3,'key formats; MAC settings in decisions spelt with the field names','2026-12-02T17:08:41.199Z');
INSERT INTO schema_version VALUES(4,'measurements.partial: rows of configs a search dropped before their full measurement','2026-12-02T17:08:41.204Z');
INSERT INTO schema_version VALUES(5,'measurements.samples_s: every kept sample of a row, in the order it was taken','2026-12-02T17:08:41.208Z');
INSERT INTO schema_version VALUES(6,'measurements_view shows partial','2026-12-02T17:08:41.211Z');
CREATE TABLE devices (
  id            INTEGER PRIMARY KEY,
  fingerprint   TEXT    NOT NULL UNIQUE,  -- DeviceFingerprint::key(): every field below
  digest        TEXT    NOT NULL,         -- DeviceFingerprint::digest(): short hex of the key
  backend       TEXT    NOT NULL,         -- 'cpu' | 'cuda'
  name          TEXT    NOT NULL,
  compute_units INTEGER NOT NULL,         -- logical CPUs or SMs
  memory_mib    INTEGER NOT NULL,
  arch          TEXT    NOT NULL,         -- 'avx512' | 'avx2' | 'generic' | 'sm_90' ...
  runtime       TEXT    NOT NULL,         -- driver/runtime versions ('' on CPUs)
  threads       INTEGER NOT NULL,         -- worker threads (CPU), 0 on GPUs
  first_seen    TEXT    NOT NULL
);
INSERT INTO devices VALUES(1,'cpu|AMD EPYC|2|23552|avx2||2','b24de0ac860735c','cpu','AMD EPYC',2,23552,'avx2','',2,'2026-12-02T17:08:41.227Z');
CREATE TABLE builds (
  id            INTEGER PRIMARY KEY,
  git_revision  TEXT NOT NULL,            -- short hash, '-dirty' when the tree had edits
  compiler      TEXT NOT NULL,
  registry_hash TEXT NOT NULL,            -- digest of the compiled instance list
  version       TEXT NOT NULL DEFAULT '',
  build_type    TEXT NOT NULL DEFAULT '',
  first_seen    TEXT NOT NULL,
  UNIQUE (git_revision, compiler, registry_hash)
);
INSERT INTO builds VALUES(1,'9c43f760efb9','GNU 12.2.0','7b5b158094b45c45','0.1.0','Release','2026-12-02T17:08:41.231Z');
CREATE TABLE instances (
  id      INTEGER PRIMARY KEY,
  name    TEXT NOT NULL UNIQUE,           -- canonical instance name (kernels/instance.h)
  backend TEXT NOT NULL,
  family  TEXT NOT NULL,                  -- 'mac' | 'full' | 'match' | 'attend' | 'merge'
  config  TEXT NOT NULL                   -- 'key=value,...'
);
INSERT INTO instances VALUES(1,'mac_cpu_avx2_hd128_bf16','cpu','mac','isa=avx2,head_dim=128,kv_dtype=bf16');
INSERT INTO instances VALUES(2,'full_cpu_avx2_hd128_bf16','cpu','full','isa=avx2,head_dim=128,kv_dtype=bf16');
CREATE TABLE workloads (
  id            INTEGER PRIMARY KEY,
  key           TEXT    NOT NULL UNIQUE,  -- Workload::key(): every column below
  batch         INTEGER NOT NULL,
  context       INTEGER NOT NULL,         -- KV tokens per request
  q_heads       INTEGER NOT NULL,
  kv_heads      INTEGER NOT NULL,
  head_dim      INTEGER NOT NULL,
  kv_dtype      TEXT    NOT NULL,
  page_size     INTEGER NOT NULL,
  hit_rate      REAL    NOT NULL,         -- forced fraction of hits per step
  lag           TEXT    NOT NULL,         -- lag distribution, e.g. 'uniform:256:4096'
  coherence     TEXT    NOT NULL,         -- 'head' | 'group' | ...
  ring_capacity INTEGER NOT NULL,         -- K
  band          INTEGER NOT NULL,         -- r
  tau           REAL    NOT NULL,
  pick          TEXT    NOT NULL,
  min_context   INTEGER NOT NULL,
  summary_dtype TEXT    NOT NULL,
  rectify       TEXT    NOT NULL,
  accept_eps    REAL    NOT NULL,
  extra         TEXT    NOT NULL DEFAULT ''  -- anything else that changes the work
, quota TEXT NOT NULL DEFAULT 'hit-rate', skip_ratio REAL NOT NULL DEFAULT 0, subtract_guard REAL NOT NULL DEFAULT 1e-04);
INSERT INTO workloads VALUES(1,'head_dim=128,q_heads=8,kv_heads=2,dtype=bf16,page_size=16,batch=1,context=4096,lag=uniform(1,64),coherence=per-head,hit_rate=0,quota=hit-rate,skip_ratio=0,K=512,r=256,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04',1,4096,8,2,128,'bf16',16,0.0,'uniform(1,64)','per-head',512,256,0.4500000000000000111,'nearest',0,'f32','forward',1.0,'','hit-rate',0.0,0.00010000000000000000479);
INSERT INTO workloads VALUES(2,'head_dim=128,q_heads=8,kv_heads=2,dtype=bf16,page_size=16,batch=1,context=4096,lag=uniform(1,64),coherence=per-head,hit_rate=1,quota=hit-rate,skip_ratio=0,K=512,r=256,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04',1,4096,8,2,128,'bf16',16,1.0,'uniform(1,64)','per-head',512,256,0.4500000000000000111,'nearest',0,'f32','forward',1.0,'','hit-rate',0.0,0.00010000000000000000479);
INSERT INTO workloads VALUES(3,'head_dim=128,q_heads=8,kv_heads=2,dtype=bf16,page_size=16,batch=1,context=16384,lag=uniform(1,64),coherence=per-head,hit_rate=0,quota=hit-rate,skip_ratio=0,K=512,r=256,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04',1,16384,8,2,128,'bf16',16,0.0,'uniform(1,64)','per-head',512,256,0.4500000000000000111,'nearest',0,'f32','forward',1.0,'','hit-rate',0.0,0.00010000000000000000479);
INSERT INTO workloads VALUES(4,'head_dim=128,q_heads=8,kv_heads=2,dtype=bf16,page_size=16,batch=1,context=16384,lag=uniform(1,64),coherence=per-head,hit_rate=1,quota=hit-rate,skip_ratio=0,K=512,r=256,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04',1,16384,8,2,128,'bf16',16,1.0,'uniform(1,64)','per-head',512,256,0.4500000000000000111,'nearest',0,'f32','forward',1.0,'','hit-rate',0.0,0.00010000000000000000479);
INSERT INTO workloads VALUES(5,'head_dim=128,q_heads=8,kv_heads=2,dtype=bf16,page_size=16,batch=1,context=16384,lag=uniform(1,64),coherence=per-group,hit_rate=0,quota=skip-ratio,skip_ratio=0,K=2048,r=64,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04',1,16384,8,2,128,'bf16',16,0.0,'uniform(1,64)','per-group',2048,64,0.4500000000000000111,'nearest',0,'f32','forward',1.0,'','skip-ratio',0.0,0.00010000000000000000479);
INSERT INTO workloads VALUES(6,'head_dim=128,q_heads=8,kv_heads=2,dtype=bf16,page_size=16,batch=1,context=16384,lag=uniform(1,64),coherence=per-group,hit_rate=0,quota=skip-ratio,skip_ratio=0.9,K=2048,r=64,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04',1,16384,8,2,128,'bf16',16,0.0,'uniform(1,64)','per-group',2048,64,0.4500000000000000111,'nearest',0,'f32','forward',1.0,'','skip-ratio',0.9000000000000000222,0.00010000000000000000479);
CREATE TABLE runs (
  id          INTEGER PRIMARY KEY,
  run_key     TEXT    NOT NULL UNIQUE,    -- unique per invocation (host, pid, start time)
  spec_hash   TEXT    NOT NULL,
  spec_text   TEXT    NOT NULL,
  shard_index INTEGER NOT NULL DEFAULT 0,
  shard_count INTEGER NOT NULL DEFAULT 1,
  status      TEXT    NOT NULL CHECK (status IN ('running', 'finished', 'interrupted', 'failed')),
  started_at  TEXT    NOT NULL,
  finished_at TEXT,
  device_id   INTEGER NOT NULL REFERENCES devices(id),
  build_id    INTEGER NOT NULL REFERENCES builds(id),
  host        TEXT    NOT NULL DEFAULT '',
  command     TEXT    NOT NULL DEFAULT '',
  CHECK (shard_count >= 1 AND shard_index >= 0 AND shard_index < shard_count)
);
INSERT INTO runs VALUES(1,'vm:13891:2026-12-02T17:08:41.260Z:0','f0c220181ab719cb',replace('name: tiny\ndescription: a tiny CPU sweep (two contexts, two hit rates), for a schema-v6 fixture\ndevice:\n  backend: cpu\nkernels:\n  cpu:\n    chunk_tokens: 256\n    block_rows: 16\n    threads: 1\nmac:\n  K: 512\n  r: 256\nworkload:\n  batch: 1\n  context: [4K, 16K]\n  q_heads: 8\n  kv_heads: 2\n  head_dim: 128\n  dtype: bf16\n  page_size: 16\n  hit_rate: [0, 1]\n  lag: uniform(1,64)\n  coherence: per-head\nmeasure:\n  warmup: 1\n  min_samples: 5\n  max_samples: 8\n  noise: 0.05\n  time_cap: 0.5\n  mode: cold\ndecide:\n  tie_tolerance: 0.01\n  break_even: grid\noutput:\n  db: tiny.db\n  dispatch: tiny.json\n  report: tiny-report\n','\n',char(10)),0,1,'finished','2026-12-02T17:08:41.260Z','2026-12-02T17:08:43.347Z',1,1,'vm','mactune tune tiny.yaml');
INSERT INTO runs VALUES(2,'vm:13986:2026-12-02T17:08:52.152Z:0','000c294d400ee8ce',replace('name: tinyskip\ndescription: a tiny CPU skip-ratio sweep, for a schema-v6 fixture\ndevice:\n  backend: cpu\nkernels:\n  cpu:\n    chunk_tokens: 1024\n    block_rows: 16\n    threads: 1\nmac:\n  K: 2048\n  r: 64\nworkload:\n  batch: 1\n  context: 16K\n  q_heads: 8\n  kv_heads: 2\n  head_dim: 128\n  dtype: bf16\n  page_size: 16\n  skip_ratio: [0, 0.9]\nmeasure:\n  warmup: 1\n  min_samples: 5\n  max_samples: 8\n  noise: 0.05\n  time_cap: 0.5\n  mode: cold\ndecide:\n  break_even: grid\noutput:\n  db: tiny.db\n  dispatch: tinyskip.json\n  report: tinyskip-report\n','\n',char(10)),0,1,'finished','2026-12-02T17:08:52.152Z','2026-12-02T17:08:53.963Z',1,1,'vm','mactune tune tinyskip.yaml');
CREATE TABLE measurements (
  id                INTEGER PRIMARY KEY,
  device_id         INTEGER NOT NULL REFERENCES devices(id),
  build_id          INTEGER NOT NULL REFERENCES builds(id),
  instance_id       INTEGER NOT NULL REFERENCES instances(id),
  params            TEXT    NOT NULL,     -- launch params not compiled in: 'chunk=256,threads=2'
  workload_id       INTEGER NOT NULL REFERENCES workloads(id),
  policy            TEXT    NOT NULL,     -- measurement policy key (timer, launch mode, ...)
  cold              INTEGER NOT NULL CHECK (cold IN (0, 1)),
  run_id            INTEGER REFERENCES runs(id),
  status            TEXT    NOT NULL CHECK (status IN ('ok', 'failed')),
  error             TEXT    NOT NULL DEFAULT '',
  median_s          REAL,
  q1_s              REAL,
  q3_s              REAL,
  min_s             REAL,
  max_s             REAL,
  mean_s            REAL,
  samples           INTEGER NOT NULL DEFAULT 0,
  rel_noise         REAL,
  stop_reason       TEXT    NOT NULL DEFAULT '',
  modeled_bytes     REAL,                 -- KV + aux bytes the kernel must read, by the model
  clock_mhz         REAL,                 -- mean SM / core clock over the samples, if known
  throttled_samples INTEGER NOT NULL DEFAULT 0,
  notes             TEXT    NOT NULL DEFAULT '',
  started_at        TEXT    NOT NULL,
  finished_at       TEXT    NOT NULL, partial INTEGER NOT NULL DEFAULT 0 CHECK (partial IN (0, 1)), samples_s TEXT,
  CHECK (status = 'failed' OR (samples > 0 AND median_s IS NOT NULL AND q1_s IS NOT NULL AND
                               q3_s IS NOT NULL AND min_s IS NOT NULL AND mean_s IS NOT NULL)),
  UNIQUE (device_id, build_id, instance_id, params, workload_id, policy, cold)
);
INSERT INTO measurements VALUES(1,1,1,2,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan',1,'steady_clock',1,1,'ok','',0.0010177795000000000764,0.0009128572500000000766,0.0010662572500000000105,0.00076733000000000009532,0.0012056920000000001785,0.0009971593750000000856,8,0.15721805312447345581,'max_samples',4200448.0,2445.4039999999999963,7,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=7 (discarded 7); wall_s=0.352; skip_ratio=0; kv_tokens=8194/8194','2026-12-02T17:08:41.263Z','2026-12-02T17:08:41.811Z',0,'[0.000936236,0.001005747,0.0007673300000000001,0.0012056920000000002,0.001029812,0.001152091,0.0010376460000000001,0.000842721]');
INSERT INTO measurements VALUES(2,1,1,1,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan',1,'steady_clock',1,1,'ok','',0.0010912619999999999612,0.0010564240000000002517,0.0012055887500000000978,0.00093876100000000008757,0.0013409450000000000709,0.0011306983749999998788,8,0.098296148221050427817,'max_samples',5255200.0,2445.4039999999999963,7,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=7 (discarded 7); wall_s=0.352; skip_ratio=0; kv_tokens=8194/8194','2026-12-02T17:08:41.263Z','2026-12-02T17:08:41.811Z',0,'[0.0010690250000000001,0.001332389,0.001163322,0.001099733,0.0009387610000000001,0.001340945,0.0010186210000000002,0.001082791]');
INSERT INTO measurements VALUES(3,1,1,2,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan',2,'steady_clock',1,1,'ok','',0.00098421149999999998046,0.00091281500000000008899,0.0010380650000000001247,0.00074193100000000003577,0.0010757380000000001281,0.0009606332499999998848,8,0.094853205332390430615,'max_samples',4200448.0,2445.4039999999999963,3,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=3 (discarded 3); wall_s=0.231; skip_ratio=0; kv_tokens=8194/8194','2026-12-02T17:08:41.813Z','2026-12-02T17:08:42.112Z',0,'[0.0010757380000000001,0.0009152470000000001,0.000741931,0.001031405,0.000905519,0.0010370260000000001,0.0009370180000000001,0.001041182]');
INSERT INTO measurements VALUES(4,1,1,1,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan',2,'steady_clock',1,1,'ok','',0.00031851700000000004054,0.00031533200000000003631,0.00032297600000000004647,0.00029861000000000004293,0.00035793200000000004179,0.00032267340000000007413,5,0.020755292182206938611,'noise',1372224.0,2445.4039999999999963,3,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=3 (discarded 3); wall_s=0.231; skip_ratio=0.9265; kv_tokens=602/8194','2026-12-02T17:08:41.813Z','2026-12-02T17:08:42.112Z',0,'[0.00029861000000000004,0.00031533200000000004,0.00035793200000000004,0.00031851700000000004,0.00032297600000000005]');
INSERT INTO measurements VALUES(5,1,1,2,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan',3,'steady_clock',1,1,'ok','',0.0026889590000000003142,0.0025231050000000003127,0.0028935652500000001545,0.002249289000000000236,0.0029747700000000002786,0.0026803740000000005581,8,0.10650595100185614172,'max_samples',16783360.0,2445.4039999999999963,11,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=11 (discarded 11); wall_s=0.436; skip_ratio=0; kv_tokens=32770/32770','2026-12-02T17:08:42.114Z','2026-12-02T17:08:42.839Z',0,'[0.0025329610000000002,0.0026552810000000002,0.002722637,0.002493537,0.0022492890000000002,0.0028798720000000003,0.002934645,0.0029747700000000003]');
INSERT INTO measurements VALUES(6,1,1,1,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan',3,'steady_clock',1,1,'ok','',0.0026157770000000001194,0.0022750779999999998226,0.0028652642500000000472,0.0020680400000000001559,0.0029851890000000000716,0.0025613860000000001314,8,0.16554702541539290105,'max_samples',17838112.0,2445.4039999999999963,11,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=11 (discarded 11); wall_s=0.436; skip_ratio=0; kv_tokens=32770/32770','2026-12-02T17:08:42.114Z','2026-12-02T17:08:42.839Z',0,'[0.002327847,0.0028496850000000002,0.002656223,0.002116771,0.00206804,0.002575331,0.0029120020000000003,0.002985189]');
INSERT INTO measurements VALUES(7,1,1,2,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan',4,'steady_clock',1,1,'ok','',0.0030887940000000001748,0.0030792660000000002078,0.0031070190000000003603,0.0027332670000000001617,0.0031300419999999999805,0.0030276776000000000903,5,0.0087478753843734068096,'noise',16783360.0,2445.4039999999999963,5,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=5 (discarded 5); wall_s=0.335; skip_ratio=0; kv_tokens=32770/32770','2026-12-02T17:08:42.847Z','2026-12-02T17:08:43.345Z',0,'[0.003088794,0.003130042,0.003079266,0.0031070190000000004,0.002733267]');
INSERT INTO measurements VALUES(8,1,1,1,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan',4,'steady_clock',1,1,'ok','',0.00034850950000000000114,0.00032111275000000000972,0.00039080550000000004477,0.00022848900000000001413,0.00044804100000000004252,0.00035268450000000003486,8,0.14840485266542238762,'max_samples',1372224.0,2445.4039999999999963,5,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=5 (discarded 5); wall_s=0.335; skip_ratio=0.9816; kv_tokens=602/32770','2026-12-02T17:08:42.847Z','2026-12-02T17:08:43.345Z',0,'[0.000344557,0.00037269900000000004,0.00022848900000000001,0.000302929,0.000352462,0.000327174,0.00044804100000000004,0.00044512500000000005]');
INSERT INTO measurements VALUES(9,1,1,2,'threads=1,chunk_tokens=1024,block_rows=16,match_mode=scan',5,'steady_clock',1,2,'ok','',0.0031365885000000002201,0.003030855250000000136,0.0040100420000000001202,0.0027702070000000002247,0.0065738510000000003469,0.0039043087500000004698,4,0.091045568011232591576,'time_cap',16783360.0,2445.4039999999999963,17,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=17 (discarded 16); wall_s=0.532; skip_ratio=0; kv_tokens=32770/32770','2026-12-02T17:08:52.156Z','2026-12-02T17:08:53.273Z',0,'[0.0027702070000000002,0.0031554390000000003,0.003117738,0.006573851]');
INSERT INTO measurements VALUES(10,1,1,1,'threads=1,chunk_tokens=1024,block_rows=16,match_mode=scan',5,'steady_clock',1,2,'ok','',0.0029329165000000004259,0.0027840497499999998509,0.0031188305000000001235,0.0025424800000000001738,0.003471542000000000204,0.0029699637500000004158,4,0.11595748259454383144,'time_cap',20983840.0,2445.4039999999999963,17,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=17 (discarded 16); wall_s=0.532; skip_ratio=0; kv_tokens=32770/32770','2026-12-02T17:08:52.156Z','2026-12-02T17:08:53.273Z',0,'[0.002864573,0.0030012600000000004,0.00254248,0.003471542]');
INSERT INTO measurements VALUES(11,1,1,2,'threads=1,chunk_tokens=1024,block_rows=16,match_mode=scan',6,'steady_clock',1,2,'ok','',0.0026904470000000003243,0.0024173175000000001605,0.0029212222500000000965,0.0021959300000000000173,0.0029560650000000003416,0.0026500849999999999406,8,0.14047780852029420617,'max_samples',16783360.0,2445.4039999999999963,8,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=8 (discarded 8); wall_s=0.413; skip_ratio=0; kv_tokens=32770/32770','2026-12-02T17:08:53.281Z','2026-12-02T17:08:53.953Z',0,'[0.00219593,0.002387508,0.0024272540000000002,0.0029370990000000003,0.0029560650000000003,0.00291593,0.002783392,0.0025975020000000002]');
INSERT INTO measurements VALUES(12,1,1,1,'threads=1,chunk_tokens=1024,block_rows=16,match_mode=scan',6,'steady_clock',1,2,'ok','',0.0010758280000000000273,0.001013575750000000105,0.0011733407500000001856,0.00082707200000000009355,0.0016644220000000000368,0.001133563750000000014,8,0.11755204363522793464,'max_samples',5887552.0,2445.4039999999999963,8,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=8 (discarded 8); wall_s=0.413; skip_ratio=0.9; kv_tokens=3277/32770','2026-12-02T17:08:53.281Z','2026-12-02T17:08:53.953Z',0,'[0.0010866580000000001,0.001664422,0.001031875,0.0010649980000000002,0.001129278,0.0013055290000000002,0.0008270720000000001,0.000958678]');
CREATE TABLE best_configs (
  id            INTEGER PRIMARY KEY,
  device_id     INTEGER NOT NULL REFERENCES devices(id),
  build_id      INTEGER REFERENCES builds(id),
  bucket        TEXT    NOT NULL,         -- Bucket::key()
  family        TEXT    NOT NULL,
  policy        TEXT    NOT NULL,
  batch         INTEGER NOT NULL,
  context       INTEGER NOT NULL,
  q_heads       INTEGER NOT NULL,
  kv_heads      INTEGER NOT NULL,
  head_dim      INTEGER NOT NULL,
  kv_dtype      TEXT    NOT NULL,
  page_size     INTEGER NOT NULL,
  hit_rate      REAL,                     -- NULL when the bucket spans hit rates
  extra         TEXT    NOT NULL DEFAULT '',
  instance_id   INTEGER NOT NULL REFERENCES instances(id),
  params        TEXT    NOT NULL,
  median_s      REAL    NOT NULL,
  margin        REAL,                     -- runner-up median / best median - 1 (NULL: none)
  tie_tolerance REAL    NOT NULL,
  tie_set       TEXT    NOT NULL DEFAULT '[]',  -- JSON [{"instance","params","median_s"}]
  decided_at    TEXT    NOT NULL,
  UNIQUE (device_id, bucket, family, policy)
);
INSERT INTO best_configs VALUES(1,1,1,'hd128_q8_kv2_bf16_p16_b1_c4096','full','steady_clock',1,4096,8,2,128,'bf16',16,NULL,'',2,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan',0.00100099549999999992,NULL,0.010000000000000000208,'[{"instance":"full_cpu_avx2_hd128_bf16","params":"threads=1,chunk_tokens=256,block_rows=16,match_mode=scan","median_s":0.0010009955}]','2026-12-02T17:08:53.968Z');
INSERT INTO best_configs VALUES(2,1,1,'hd128_q8_kv2_bf16_p16_b1_c4096','mac','steady_clock',1,4096,8,2,128,'bf16',16,NULL,'',1,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan;K=512,r=256,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04',1.0,NULL,0.010000000000000000208,'[{"instance":"mac_cpu_avx2_hd128_bf16","params":"threads=1,chunk_tokens=256,block_rows=16,match_mode=scan;K=512,r=256,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04","median_s":1}]','2026-12-02T17:08:53.971Z');
INSERT INTO best_configs VALUES(3,1,1,'hd128_q8_kv2_bf16_p16_b1_c16384','full','steady_clock',1,16384,8,2,128,'bf16',16,NULL,'',2,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan',0.0028888765000000000277,NULL,0.010000000000000000208,'[{"instance":"full_cpu_avx2_hd128_bf16","params":"threads=1,chunk_tokens=256,block_rows=16,match_mode=scan","median_s":0.0028888765},{"instance":"full_cpu_avx2_hd128_bf16","params":"threads=1,chunk_tokens=1024,block_rows=16,match_mode=scan","median_s":0.0029135177500000005}]','2026-12-02T17:08:53.979Z');
INSERT INTO best_configs VALUES(4,1,1,'hd128_q8_kv2_bf16_p16_b1_c16384','mac','steady_clock',1,16384,8,2,128,'bf16',16,NULL,'',1,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan;K=512,r=256,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04',1.0,NULL,0.010000000000000000208,'[{"instance":"mac_cpu_avx2_hd128_bf16","params":"threads=1,chunk_tokens=256,block_rows=16,match_mode=scan;K=512,r=256,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04","median_s":1},{"instance":"mac_cpu_avx2_hd128_bf16","params":"threads=1,chunk_tokens=1024,block_rows=16,match_mode=scan;K=2048,r=64,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04","median_s":1}]','2026-12-02T17:08:53.983Z');
CREATE TABLE break_even (
  id               INTEGER PRIMARY KEY,
  device_id        INTEGER NOT NULL REFERENCES devices(id),
  build_id         INTEGER REFERENCES builds(id),
  bucket           TEXT    NOT NULL,
  policy           TEXT    NOT NULL,
  batch            INTEGER NOT NULL,
  context          INTEGER NOT NULL,
  q_heads          INTEGER NOT NULL,
  kv_heads         INTEGER NOT NULL,
  head_dim         INTEGER NOT NULL,
  kv_dtype         TEXT    NOT NULL,
  page_size        INTEGER NOT NULL,
  extra            TEXT    NOT NULL DEFAULT '',
  status           TEXT    NOT NULL CHECK (status IN ('found', 'ambiguous', 'never')),
  hit_rate         REAL,                  -- the smallest hit rate where MAC clearly wins
  speedup          REAL,                  -- full median / MAC median at that hit rate
  mac_instance_id  INTEGER REFERENCES instances(id),
  mac_params       TEXT    NOT NULL DEFAULT '',
  full_instance_id INTEGER REFERENCES instances(id),
  full_params      TEXT    NOT NULL DEFAULT '',
  notes            TEXT    NOT NULL DEFAULT '',
  decided_at       TEXT    NOT NULL,
  CHECK ((status = 'found') = (hit_rate IS NOT NULL)),
  UNIQUE (device_id, bucket, policy)
);
INSERT INTO break_even VALUES(1,1,1,'hd128_q8_kv2_bf16_p16_b1_c4096','steady_clock',1,4096,8,2,128,'bf16',16,'','found',1.0,3.0899810685143958011,1,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan;K=512,r=256,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04',2,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan','interval=iqr; bracket=[0,1]; lag=uniform(1,64),coherence=per-head [ok] 0:0.93x:tie 1:3.09x:faster;','2026-12-02T17:08:53.975Z');
INSERT INTO break_even VALUES(2,1,1,'hd128_q8_kv2_bf16_p16_b1_c16384','steady_clock',1,16384,8,2,128,'bf16',16,'','found',1.0,8.8628688744496209039,1,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan;K=512,r=256,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04',2,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan','interval=iqr; bracket=[0,1]; lag=uniform(1,64),coherence=per-head [ok] 0:1.03x:tie 1:8.86x:faster;','2026-12-02T17:08:53.987Z');
CREATE TABLE fidelity (
  id                  INTEGER PRIMARY KEY,
  trace_hash          TEXT    NOT NULL,
  trace_name          TEXT    NOT NULL DEFAULT '',
  layer               INTEGER NOT NULL,
  settings            TEXT    NOT NULL,   -- FidelitySettings::key(): every settings column
  engine              TEXT    NOT NULL,
  kv_dtype            TEXT    NOT NULL,
  ring_capacity       INTEGER NOT NULL,
  band                INTEGER NOT NULL,
  tau                 REAL    NOT NULL,
  pick                TEXT    NOT NULL,
  min_context         INTEGER NOT NULL,
  summary_dtype       TEXT    NOT NULL,
  rectify             TEXT    NOT NULL,
  accept_eps          REAL    NOT NULL,
  steps               INTEGER NOT NULL,
  hit_rate            REAL    NOT NULL,
  group_all_hit_rate  REAL    NOT NULL,
  skip_ratio          REAL    NOT NULL,
  head_skip_ratio     REAL    NOT NULL,
  err_mean REAL NOT NULL, err_p50 REAL NOT NULL, err_p99 REAL NOT NULL, err_max REAL NOT NULL,
  err_frac_gt_0_1 REAL NOT NULL,
  ref_err_mean REAL, ref_err_p50 REAL, ref_err_p99 REAL, ref_err_max REAL,
  ref_err_frac_gt_0_1 REAL,
  build_id            INTEGER REFERENCES builds(id),
  recorded_at         TEXT    NOT NULL, subtract_guard REAL NOT NULL DEFAULT 1e-04,
  UNIQUE (trace_hash, layer, settings)
);
CREATE TABLE nsys_reports (
  id                   INTEGER PRIMARY KEY,
  content_hash         TEXT    NOT NULL UNIQUE,
  path                 TEXT    NOT NULL,
  export_schema        TEXT    NOT NULL DEFAULT '',
  session_start_utc_ns INTEGER,
  kernels              INTEGER NOT NULL,
  ranges               INTEGER NOT NULL,
  imported_at          TEXT    NOT NULL
, nsys_version TEXT NOT NULL DEFAULT '', gpus TEXT NOT NULL DEFAULT '', memops INTEGER NOT NULL DEFAULT 0);
CREATE TABLE nsys_kernels (
  id                   INTEGER PRIMARY KEY,
  report_id            INTEGER NOT NULL REFERENCES nsys_reports(id),
  seq                  INTEGER NOT NULL,
  start_ns             INTEGER NOT NULL,  -- session-relative, as nsys writes them
  end_ns               INTEGER NOT NULL,
  gpu                  INTEGER,
  stream_id            INTEGER,
  correlation_id       INTEGER,
  pid                  INTEGER,
  name                 TEXT    NOT NULL,  -- demangled name (short name when absent)
  short_name           TEXT    NOT NULL DEFAULT '',
  grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,
  block_x INTEGER, block_y INTEGER, block_z INTEGER,
  registers_per_thread INTEGER,
  static_smem_bytes    INTEGER,
  dynamic_smem_bytes   INTEGER,
  graph_node_id        INTEGER,
  launch_tid           INTEGER,           -- thread of the launching runtime call
  nvtx_range           TEXT,              -- innermost NVTX range around the launch
  instance_id          INTEGER REFERENCES instances(id), launch_start_ns INTEGER, nvtx_range_seq INTEGER,
  UNIQUE (report_id, seq)
);
CREATE TABLE nsys_ranges (
  id          INTEGER PRIMARY KEY,
  report_id   INTEGER NOT NULL REFERENCES nsys_reports(id),
  seq         INTEGER NOT NULL,
  kind        TEXT    NOT NULL CHECK (kind IN ('push_pop', 'start_end', 'mark')),
  start_ns    INTEGER NOT NULL,
  end_ns      INTEGER,                    -- NULL for marks
  name        TEXT    NOT NULL,
  domain      TEXT    NOT NULL DEFAULT '',
  pid         INTEGER,
  tid         INTEGER,
  instance_id INTEGER REFERENCES instances(id), end_tid INTEGER,
  UNIQUE (report_id, seq)
);
CREATE TABLE nsys_memops (
  id              INTEGER PRIMARY KEY,
  report_id       INTEGER NOT NULL REFERENCES nsys_reports(id),
  kind            TEXT    NOT NULL CHECK (kind IN ('memcpy', 'memset')),
  seq             INTEGER NOT NULL,           -- row in the export's MEMCPY / MEMSET table
  start_ns        INTEGER NOT NULL,
  end_ns          INTEGER NOT NULL,
  gpu             INTEGER,
  stream_id       INTEGER,
  correlation_id  INTEGER,
  pid             INTEGER,
  bytes           INTEGER,
  copy_kind       TEXT    NOT NULL DEFAULT '',  -- 'Host-to-Device', ... ('' for memsets)
  src_kind        TEXT    NOT NULL DEFAULT '',  -- memory kinds: 'Pinned', 'Device', ...
  dst_kind        TEXT    NOT NULL DEFAULT '',
  value           INTEGER,                      -- memset value
  graph_node_id   INTEGER,
  launch_tid      INTEGER,
  launch_start_ns INTEGER,
  nvtx_range      TEXT,
  nvtx_range_seq  INTEGER,
  UNIQUE (report_id, kind, seq)
);
CREATE TABLE key_formats (
  name   TEXT PRIMARY KEY,                -- 'keys': every derived key
  digest TEXT NOT NULL                    -- of the field lists the keys are spelt from
);
INSERT INTO key_formats VALUES('keys','5aa7622c08c80e38');
CREATE INDEX measurements_by_workload ON measurements (device_id, workload_id);
CREATE INDEX measurements_by_instance ON measurements (instance_id);
CREATE VIEW measurements_view AS
SELECT m.id, d.digest AS device, d.backend, d.name AS device_name, d.arch, d.threads,
       b.git_revision, b.compiler, i.name AS instance, i.family, m.params,
       w.batch, w.context, w.q_heads, w.kv_heads, w.head_dim, w.kv_dtype, w.page_size,
       w.hit_rate, w.lag, w.coherence, w.ring_capacity, w.band, w.tau, w.pick, w.extra,
       m.policy, m.cold, m.status, m.error, m.median_s, m.q1_s, m.q3_s, m.min_s, m.max_s,
       m.mean_s, m.samples, m.rel_noise, m.stop_reason, m.modeled_bytes, m.clock_mhz,
       m.throttled_samples, m.notes, m.partial, r.run_key, r.shard_index, r.shard_count,
       m.started_at, m.finished_at
FROM measurements m
JOIN devices d ON d.id = m.device_id
JOIN builds b ON b.id = m.build_id
JOIN instances i ON i.id = m.instance_id
JOIN workloads w ON w.id = m.workload_id
LEFT JOIN runs r ON r.id = m.run_id;
COMMIT;
