#include "db/nsys_schema.h"

namespace mactune::db {

void apply_nsys_schema_v2(Connection& c) {
  c.exec(R"sql(
ALTER TABLE nsys_reports ADD COLUMN nsys_version TEXT NOT NULL DEFAULT '';
ALTER TABLE nsys_reports ADD COLUMN gpus TEXT NOT NULL DEFAULT '';  -- '0: NVIDIA H200; 1: ...'
ALTER TABLE nsys_reports ADD COLUMN memops INTEGER NOT NULL DEFAULT 0;

-- NULL in rows imported by v1: those reports carry no launch times.
ALTER TABLE nsys_kernels ADD COLUMN launch_start_ns INTEGER;  -- the launching API call
ALTER TABLE nsys_kernels ADD COLUMN nvtx_range_seq INTEGER;   -- nsys_ranges.seq of nvtx_range

ALTER TABLE nsys_ranges ADD COLUMN end_tid INTEGER;  -- start/end ranges may end elsewhere

-- CUDA memcpy and memset operations of an imported report.
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
)sql");
}

}  // namespace mactune::db
