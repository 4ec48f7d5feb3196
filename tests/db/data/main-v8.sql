PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE schema_version ( version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL);
INSERT INTO schema_version VALUES(1,'devices, builds, instances, workloads, runs, measurements, decisions, fidelity, nsys','2026-12-02T22:18:32.753Z');
INSERT INTO schema_version VALUES(2,'nsys: memcpy/memset rows, launch times and range rows of kernels','2026-12-02T22:18:32.757Z');
INSERT INTO schema_version VALUES(3,'key formats; MAC settings in decisions spelt with the field names','2026-12-02T22:18:32.757Z');
INSERT INTO schema_version VALUES(4,'measurements.partial: rows of configs a search dropped before their full measurement','2026-12-02T22:18:32.759Z');
INSERT INTO schema_version VALUES(5,'measurements.samples_s: every kept sample of a row, in the order it was taken','2026-12-02T22:18:32.759Z');
INSERT INTO schema_version VALUES(6,'measurements_view shows partial','2026-12-02T22:18:32.760Z');
INSERT INTO schema_version VALUES(7,'CUDA launch params: min_chunk spelt chunk_tokens, as the CPU engine''s','2026-12-02T22:18:32.760Z');
INSERT INTO schema_version VALUES(8,'measurements.kv_tokens_read, kv_tokens_total: the step''s KV tokens, typed (were notes); break_even.status ''found'' spelt ''ok''','2026-12-02T22:18:32.764Z');
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
INSERT INTO devices VALUES(1,'cpu|AMD EPYC|2|23552|avx2||2','b24de0ac860735c','cpu','AMD EPYC',2,23552,'avx2','',2,'2026-12-02T22:18:32.769Z');
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
INSERT INTO builds VALUES(1,'489fc3f51828-dirty','GNU 12.2.0','7b5b158094b45c45','0.1.0','Release','2026-12-02T22:18:32.769Z');
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
, quota TEXT NOT NULL DEFAULT 'hit-rate', skip_ratio REAL NOT NULL DEFAULT 0, subtract_guard REAL NOT NULL DEFAULT 1e-04, group_hits INTEGER NOT NULL DEFAULT 0);
INSERT INTO workloads VALUES(1,'head_dim=128,q_heads=8,kv_heads=2,dtype=bf16,page_size=16,batch=1,context=4096,lag=uniform(1,64),coherence=per-head,hit_rate=0,quota=hit-rate,skip_ratio=0,K=512,r=256,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04,group_hits=false',1,4096,8,2,128,'bf16',16,0.0,'uniform(1,64)','per-head',512,256,0.4500000000000000111,'nearest',0,'f32','forward',1.0,'','hit-rate',0.0,0.00010000000000000000479,0);
INSERT INTO workloads VALUES(2,'head_dim=128,q_heads=8,kv_heads=2,dtype=bf16,page_size=16,batch=1,context=4096,lag=uniform(1,64),coherence=per-head,hit_rate=1,quota=hit-rate,skip_ratio=0,K=512,r=256,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04,group_hits=false',1,4096,8,2,128,'bf16',16,1.0,'uniform(1,64)','per-head',512,256,0.4500000000000000111,'nearest',0,'f32','forward',1.0,'','hit-rate',0.0,0.00010000000000000000479,0);
INSERT INTO workloads VALUES(3,'head_dim=128,q_heads=8,kv_heads=2,dtype=bf16,page_size=16,batch=1,context=16384,lag=uniform(1,64),coherence=per-head,hit_rate=0,quota=hit-rate,skip_ratio=0,K=512,r=256,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04,group_hits=false',1,16384,8,2,128,'bf16',16,0.0,'uniform(1,64)','per-head',512,256,0.4500000000000000111,'nearest',0,'f32','forward',1.0,'','hit-rate',0.0,0.00010000000000000000479,0);
INSERT INTO workloads VALUES(4,'head_dim=128,q_heads=8,kv_heads=2,dtype=bf16,page_size=16,batch=1,context=16384,lag=uniform(1,64),coherence=per-head,hit_rate=1,quota=hit-rate,skip_ratio=0,K=512,r=256,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04,group_hits=false',1,16384,8,2,128,'bf16',16,1.0,'uniform(1,64)','per-head',512,256,0.4500000000000000111,'nearest',0,'f32','forward',1.0,'','hit-rate',0.0,0.00010000000000000000479,0);
INSERT INTO workloads VALUES(5,'head_dim=128,q_heads=8,kv_heads=2,dtype=bf16,page_size=16,batch=1,context=16384,lag=uniform(1,64),coherence=per-group,hit_rate=0,quota=skip-ratio,skip_ratio=0,K=2048,r=64,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04,group_hits=false',1,16384,8,2,128,'bf16',16,0.0,'uniform(1,64)','per-group',2048,64,0.4500000000000000111,'nearest',0,'f32','forward',1.0,'','skip-ratio',0.0,0.00010000000000000000479,0);
INSERT INTO workloads VALUES(6,'head_dim=128,q_heads=8,kv_heads=2,dtype=bf16,page_size=16,batch=1,context=16384,lag=uniform(1,64),coherence=per-group,hit_rate=0,quota=skip-ratio,skip_ratio=0.9,K=2048,r=64,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04,group_hits=false',1,16384,8,2,128,'bf16',16,0.0,'uniform(1,64)','per-group',2048,64,0.4500000000000000111,'nearest',0,'f32','forward',1.0,'','skip-ratio',0.9000000000000000222,0.00010000000000000000479,0);
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
INSERT INTO runs VALUES(1,'vm:15693:2026-12-02T22:18:32.774Z:0','e22b12c4edcde343',replace('name: tiny\ndescription: a tiny CPU sweep (two contexts, two hit rates), for a schema-v8 fixture\ndevice:\n  backend: cpu\nkernels:\n  cpu:\n    chunk_tokens: 256\n    block_rows: 16\n    threads: 1\n    match_mode: [scan, pruned]\nmac:\n  K: 512\n  r: 256\nworkload:\n  batch: 1\n  context: [4K, 16K]\n  q_heads: 8\n  kv_heads: 2\n  head_dim: 128\n  dtype: bf16\n  page_size: 16\n  hit_rate: [0, 1]\n  lag: uniform(1,64)\n  coherence: per-head\nmeasure:\n  warmup: 1\n  min_samples: 5\n  max_samples: 8\n  noise: 0.05\n  time_cap: 0.5\n  mode: cold\ndecide:\n  tie_tolerance: 0.01\n  break_even: grid\noutput:\n  db: tiny.db\n  dispatch: tiny.json\n  report: tiny-report\n','\n',char(10)),0,1,'finished','2026-12-02T22:18:32.774Z','2026-12-02T22:18:34.278Z',1,1,'vm','mactune tune tiny.yaml');
INSERT INTO runs VALUES(2,'vm:15694:2026-12-02T22:18:34.312Z:0','b0546c72b8cecfa4',replace('name: tinyskip\ndescription: a tiny CPU skip-ratio sweep, for a schema-v8 fixture\ndevice:\n  backend: cpu\nkernels:\n  cpu:\n    chunk_tokens: 1024\n    block_rows: 16\n    threads: 1\nmac:\n  K: 2048\n  r: 64\nworkload:\n  batch: 1\n  context: 16K\n  q_heads: 8\n  kv_heads: 2\n  head_dim: 128\n  dtype: bf16\n  page_size: 16\n  skip_ratio: [0, 0.9]\nmeasure:\n  warmup: 1\n  min_samples: 5\n  max_samples: 8\n  noise: 0.05\n  time_cap: 0.5\n  mode: cold\ndecide:\n  break_even: grid\noutput:\n  db: tiny.db\n  dispatch: tinyskip.json\n  report: tinyskip-report\n','\n',char(10)),0,1,'finished','2026-12-02T22:18:34.312Z','2026-12-02T22:18:34.829Z',1,1,'vm','mactune tune tinyskip.yaml');
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
  finished_at       TEXT    NOT NULL, partial INTEGER NOT NULL DEFAULT 0 CHECK (partial IN (0, 1)), samples_s TEXT, kv_tokens_read INTEGER, kv_tokens_total INTEGER,
  CHECK (status = 'failed' OR (samples > 0 AND median_s IS NOT NULL AND q1_s IS NOT NULL AND
                               q3_s IS NOT NULL AND min_s IS NOT NULL AND mean_s IS NOT NULL)),
  UNIQUE (device_id, build_id, instance_id, params, workload_id, policy, cold)
);
INSERT INTO measurements VALUES(1,1,1,2,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan',1,'steady_clock',1,1,'ok','',0.00059083799999999999687,0.00056966825000000003917,0.00062644000000000002632,0.00054006300000000002307,0.00067870300000000001027,0.00060244237500000003601,8,0.060902384917693078159,'max_samples',4200448.0,2445.4039999999999963,0,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=0 (discarded 0); wall_s=0.113; skip_ratio=0','2026-12-02T22:18:32.774Z','2026-12-02T22:18:32.993Z',0,'[0.000540063,0.000607329,0.000610395,0.0006745750000000001,0.000678703,0.000574347,0.0005618540000000001,0.000572273]',8194,8194);
INSERT INTO measurements VALUES(2,1,1,1,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan',1,'steady_clock',1,1,'ok','',0.00077445800000000000404,0.00074969125000000000607,0.00085583250000000000903,0.00068837100000000001325,0.00099898300000000016252,0.00080817462500000014982,8,0.093835770177336880193,'max_samples',5255200.0,2445.4039999999999963,0,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=0 (discarded 0); wall_s=0.113; skip_ratio=0','2026-12-02T22:18:32.774Z','2026-12-02T22:18:32.993Z',0,'[0.000688371,0.0008843490000000001,0.000748294,0.0009989830000000002,0.000846327,0.000750157,0.000775004,0.0007739120000000001]',8194,8194);
INSERT INTO measurements VALUES(3,1,1,2,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan',2,'steady_clock',1,1,'ok','',0.00068469000000000005985,0.00063584525000000009353,0.00072378675000000006461,0.00056587200000000003295,0.00073099100000000006259,0.00067243762500000000929,8,0.095041959426893835027,'max_samples',4200448.0,2445.4039999999999963,0,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=0 (discarded 0); wall_s=0.106; skip_ratio=0','2026-12-02T22:18:32.994Z','2026-12-02T22:18:33.100Z',0,'[0.000565872,0.0007309910000000001,0.000622568,0.0007223640000000001,0.000666571,0.000728055,0.0006402710000000001,0.0007028090000000001]',8194,8194);
INSERT INTO measurements VALUES(4,1,1,1,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan',2,'steady_clock',1,1,'ok','',0.00022736150000000001519,0.00021157725000000001465,0.00025967650000000003359,0.00019444500000000001279,0.00029047499999999999969,0.00023587000000000000327,8,0.16218112829128938923,'max_samples',1372224.0,2445.4039999999999963,0,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=0 (discarded 0); wall_s=0.106; skip_ratio=0.9265','2026-12-02T22:18:32.994Z','2026-12-02T22:18:33.100Z',0,'[0.00022708600000000001,0.000290475,0.000213601,0.00020550600000000002,0.000255248,0.00022763700000000002,0.000194445,0.000272962]',602,8194);
INSERT INTO measurements VALUES(5,1,1,2,'threads=1,chunk_tokens=256,block_rows=16,match_mode=pruned',1,'steady_clock',1,1,'ok','',0.0006960155000000000855,0.00061979800000000007196,0.00070228800000000002248,0.00061368100000000003549,0.00077058500000000006331,0.00067802562500000006489,8,0.09814763837874294905,'max_samples',4200448.0,2445.4039999999999963,0,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=0 (discarded 0); wall_s=0.111; skip_ratio=0','2026-12-02T22:18:33.101Z','2026-12-02T22:18:33.272Z',0,'[0.000621827,0.0007705850000000001,0.000613681,0.000698059,0.0006939720000000001,0.0006137110000000001,0.000698391,0.000713979]',8194,8194);
INSERT INTO measurements VALUES(6,1,1,1,'threads=1,chunk_tokens=256,block_rows=16,match_mode=pruned',1,'steady_clock',1,1,'ok','',0.00074801350000000001692,0.00073201300000000010803,0.00077351125000000003212,0.00069606600000000006748,0.00087490100000000008573,0.00076428887499999998474,8,0.041423849569559821615,'noise',5255200.0,2445.4039999999999963,0,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=0 (discarded 0); wall_s=0.111; skip_ratio=0','2026-12-02T22:18:33.101Z','2026-12-02T22:18:33.272Z',0,'[0.0007173160000000001,0.0008426110000000001,0.000747162,0.0006960660000000001,0.0008749010000000001,0.000748865,0.0007504780000000001,0.000736912]',8194,8194);
INSERT INTO measurements VALUES(7,1,1,2,'threads=1,chunk_tokens=256,block_rows=16,match_mode=pruned',2,'steady_clock',1,1,'ok','',0.00064346249999999998066,0.00061990800000000006921,0.00067590775000000004411,0.00054771700000000008226,0.00071131500000000001584,0.00064318925000000004219,8,0.068478914155836498323,'max_samples',4200448.0,2445.4039999999999963,0,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=0 (discarded 0); wall_s=0.084; skip_ratio=0','2026-12-02T22:18:33.273Z','2026-12-02T22:18:33.357Z',0,'[0.000698902,0.000640061,0.000646864,0.000711315,0.00062361,0.000668243,0.0005477170000000001,0.0006088020000000001]',8194,8194);
INSERT INTO measurements VALUES(8,1,1,1,'threads=1,chunk_tokens=256,block_rows=16,match_mode=pruned',2,'steady_clock',1,1,'ok','',0.00022305800000000001819,0.0002196920000000000101,0.00023603300000000002186,0.00021747800000000000724,0.00024998899999999999463,0.00022924999999999998872,5,0.037088595791229250764,'noise',1372224.0,2445.4039999999999963,0,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=0 (discarded 0); wall_s=0.084; skip_ratio=0.9265','2026-12-02T22:18:33.273Z','2026-12-02T22:18:33.357Z',0,'[0.00022305800000000002,0.000219692,0.000217478,0.000249989,0.00023603300000000002]',602,8194);
INSERT INTO measurements VALUES(9,1,1,2,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan',3,'steady_clock',1,1,'ok','',0.001380048500000000209,0.0013259375000000000761,0.0014487722500000001658,0.0013013320000000000963,0.0015125680000000001589,0.0013904132500000001507,8,0.067884041828964694631,'max_samples',16783360.0,2445.4039999999999963,0,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=0 (discarded 0); wall_s=0.138; skip_ratio=0','2026-12-02T22:18:33.358Z','2026-12-02T22:18:33.723Z',0,'[0.0015125680000000002,0.001301332,0.001357546,0.0013207070000000002,0.0014538370000000001,0.0014470840000000002,0.0014025510000000001,0.001327681]',32770,32770);
INSERT INTO measurements VALUES(10,1,1,1,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan',3,'steady_clock',1,1,'ok','',0.0015147515000000001152,0.001459993500000000095,0.0015479287500000001032,0.0014240310000000000814,0.0016377720000000000125,0.0015182128750000000935,8,0.056552117030417230203,'max_samples',17838112.0,2445.4039999999999963,0,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=0 (discarded 0); wall_s=0.138; skip_ratio=0','2026-12-02T22:18:33.358Z','2026-12-02T22:18:33.723Z',0,'[0.001450932,0.0015094210000000002,0.001424031,0.001637772,0.001525632,0.0016148190000000002,0.001520082,0.0014630140000000001]',32770,32770);
INSERT INTO measurements VALUES(11,1,1,2,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan',4,'steady_clock',1,1,'ok','',0.0016112475000000000668,0.0014882420000000000804,0.0018456622499999999521,0.0013741980000000000861,0.0023987700000000001555,0.0017159465000000000481,8,0.15943093100222022195,'max_samples',16783360.0,2445.4039999999999963,0,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=0 (discarded 0); wall_s=0.115; skip_ratio=0','2026-12-02T22:18:33.724Z','2026-12-02T22:18:33.840Z',0,'[0.0014563520000000002,0.0017120920000000001,0.001510403,0.00239877,0.001374198,0.001802882,0.001498872,0.001974003]',32770,32770);
INSERT INTO measurements VALUES(12,1,1,1,'threads=1,chunk_tokens=256,block_rows=16,match_mode=scan',4,'steady_clock',1,1,'ok','',0.00019595199999999999684,0.00017338474999999999026,0.00022653675000000001262,0.00017201300000000002156,0.00024991900000000003088,0.00020256475000000000565,8,0.18002491987833735276,'max_samples',1372224.0,2445.4039999999999963,0,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=0 (discarded 0); wall_s=0.115; skip_ratio=0.9816','2026-12-02T22:18:33.724Z','2026-12-02T22:18:33.840Z',0,'[0.00022275700000000002,0.00018588800000000002,0.000173745,0.00017230400000000002,0.000237876,0.00024991900000000003,0.00017201300000000002,0.000206016]',602,32770);
INSERT INTO measurements VALUES(13,1,1,2,'threads=1,chunk_tokens=256,block_rows=16,match_mode=pruned',3,'steady_clock',1,1,'ok','',0.0014826410000000000369,0.0014095439999999999879,0.0015389322500000001021,0.0013396030000000001911,0.0018448910000000001956,0.0015054641249999999117,8,0.066287666872830330877,'max_samples',16783360.0,2445.4039999999999963,0,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=0 (discarded 0); wall_s=0.115; skip_ratio=0','2026-12-02T22:18:33.841Z','2026-12-02T22:18:34.180Z',0,'[0.0018448910000000002,0.001536583,0.001440001,0.0014134010000000001,0.0013396030000000002,0.0015459800000000002,0.001397973,0.001525281]',32770,32770);
INSERT INTO measurements VALUES(14,1,1,1,'threads=1,chunk_tokens=256,block_rows=16,match_mode=pruned',3,'steady_clock',1,1,'ok','',0.001510964000000000057,0.0014841340000000000174,0.0015354599999999999932,0.0014517730000000001692,0.0015551270000000001151,0.0015074915999999998969,5,0.02632634397642832913,'noise',17838112.0,2445.4039999999999963,0,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=0 (discarded 0); wall_s=0.115; skip_ratio=0','2026-12-02T22:18:33.841Z','2026-12-02T22:18:34.180Z',0,'[0.00153546,0.001484134,0.001510964,0.0014517730000000002,0.0015551270000000001]',32770,32770);
INSERT INTO measurements VALUES(15,1,1,2,'threads=1,chunk_tokens=256,block_rows=16,match_mode=pruned',4,'steady_clock',1,1,'ok','',0.001686844500000000014,0.0015969212500000001461,0.0018182210000000000732,0.0013615650000000001276,0.0020793809999999999377,0.0016997602500000001148,8,0.12241718303020832081,'max_samples',16783360.0,2445.4039999999999963,0,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=0 (discarded 0); wall_s=0.096; skip_ratio=0','2026-12-02T22:18:34.181Z','2026-12-02T22:18:34.277Z',0,'[0.0013615650000000001,0.0018419360000000002,0.00150295,0.002079381,0.0018103160000000002,0.0017066420000000002,0.001667047,0.0016282450000000002]',32770,32770);
INSERT INTO measurements VALUES(16,1,1,1,'threads=1,chunk_tokens=256,block_rows=16,match_mode=pruned',4,'steady_clock',1,1,'ok','',0.00019624800000000002246,0.00018749200000000001346,0.00019709000000000002558,0.00017382599999999999895,0.00020140800000000000694,0.00019121280000000001348,5,0.038982389629448332968,'noise',1372224.0,2445.4039999999999963,0,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=0 (discarded 0); wall_s=0.096; skip_ratio=0.9816','2026-12-02T22:18:34.181Z','2026-12-02T22:18:34.277Z',0,'[0.00019709000000000003,0.00019624800000000002,0.000187492,0.000173826,0.000201408]',602,32770);
INSERT INTO measurements VALUES(17,1,1,2,'threads=1,chunk_tokens=1024,block_rows=16,match_mode=scan',5,'steady_clock',1,2,'ok','',0.0014849550000000000422,0.0014695759999999999986,0.0014997530000000001536,0.001357817000000000095,0.0015329360000000001509,0.0014690074000000001748,5,0.015354610341727571026,'noise',16783360.0,2445.4039999999999963,0,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=0 (discarded 0); wall_s=0.11; skip_ratio=0','2026-12-02T22:18:34.312Z','2026-12-02T22:18:34.704Z',0,'[0.001484955,0.001469576,0.0015329360000000002,0.001357817,0.0014997530000000002]',32770,32770);
INSERT INTO measurements VALUES(18,1,1,1,'threads=1,chunk_tokens=1024,block_rows=16,match_mode=scan',5,'steady_clock',1,2,'ok','',0.0019628220000000003511,0.0018672802500000001101,0.0020720370000000000974,0.0018037740000000001758,0.0021752100000000003376,0.0019739566250000003394,8,0.082664900485117834283,'max_samples',20983840.0,2445.4039999999999963,0,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=0 (discarded 0); wall_s=0.11; skip_ratio=0','2026-12-02T22:18:34.312Z','2026-12-02T22:18:34.704Z',0,'[0.0021752100000000003,0.00196171,0.002058682,0.0018037740000000002,0.0021121020000000003,0.001963934,0.00187644,0.001839801]',32770,32770);
INSERT INTO measurements VALUES(19,1,1,2,'threads=1,chunk_tokens=1024,block_rows=16,match_mode=scan',6,'steady_clock',1,2,'ok','',0.001723378000000000236,0.0015618472500000001902,0.0018349412500000001745,0.0014538470000000000819,0.0020551850000000001714,0.0017242155000000000328,8,0.14969556121756236177,'max_samples',16783360.0,2445.4039999999999963,0,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=0 (discarded 0); wall_s=0.123; skip_ratio=0','2026-12-02T22:18:34.705Z','2026-12-02T22:18:34.828Z',0,'[0.00152442,0.0018002860000000001,0.001574323,0.002055185,0.001722261,0.0019389070000000001,0.001453847,0.0017244950000000002]',32770,32770);
INSERT INTO measurements VALUES(20,1,1,1,'threads=1,chunk_tokens=1024,block_rows=16,match_mode=scan',6,'steady_clock',1,2,'ok','',0.0007148150000000000467,0.00069310500000000006652,0.00077509099999999999611,0.00061252900000000000315,0.00086511300000000003647,0.00073251000000000001874,8,0.10214335485405311165,'max_samples',5887552.0,2445.4039999999999963,0,'timer=steady_clock; clock: cpu MHz from /proc/cpuinfo; interleaved=2; disturbed=0 (discarded 0); wall_s=0.123; skip_ratio=0.9','2026-12-02T22:18:34.705Z','2026-12-02T22:18:34.828Z',0,'[0.000705463,0.000865113,0.000836789,0.000754525,0.000718056,0.0007115740000000001,0.0006560310000000001,0.000612529]',3277,32770);
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
INSERT INTO best_configs VALUES(1,1,1,'hd128_q8_kv2_bf16_p16_b1_c4096','full','steady_clock',1,4096,8,2,128,'bf16',16,NULL,'',2,'threads=1,chunk_tokens=256,block_rows=16,match_mode=pruned',0.00066973900000000003308,NULL,0.010000000000000000208,'[{"instance":"full_cpu_avx2_hd128_bf16","params":"threads=1,chunk_tokens=256,block_rows=16,match_mode=pruned","median_s":0.000669739},{"instance":"full_cpu_avx2_hd128_bf16","params":"threads=1,chunk_tokens=256,block_rows=16,match_mode=scan","median_s":0.0006377640000000001}]','2026-12-02T22:18:34.831Z');
INSERT INTO best_configs VALUES(2,1,1,'hd128_q8_kv2_bf16_p16_b1_c4096','mac','steady_clock',1,4096,8,2,128,'bf16',16,NULL,'',1,'threads=1,chunk_tokens=256,block_rows=16,match_mode=pruned;K=512,r=256,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04,group_hits=false',1.0,NULL,0.010000000000000000208,'[{"instance":"mac_cpu_avx2_hd128_bf16","params":"threads=1,chunk_tokens=256,block_rows=16,match_mode=pruned;K=512,r=256,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04,group_hits=false","median_s":1},{"instance":"mac_cpu_avx2_hd128_bf16","params":"threads=1,chunk_tokens=256,block_rows=16,match_mode=scan;K=512,r=256,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04,group_hits=false","median_s":1.0272916973418864}]','2026-12-02T22:18:34.831Z');
INSERT INTO best_configs VALUES(3,1,1,'hd128_q8_kv2_bf16_p16_b1_c16384','full','steady_clock',1,16384,8,2,128,'bf16',16,NULL,'',2,'threads=1,chunk_tokens=256,block_rows=16,match_mode=pruned',0.0015847427500000001339,NULL,0.010000000000000000208,'[{"instance":"full_cpu_avx2_hd128_bf16","params":"threads=1,chunk_tokens=256,block_rows=16,match_mode=pruned","median_s":0.0015847427500000001},{"instance":"full_cpu_avx2_hd128_bf16","params":"threads=1,chunk_tokens=256,block_rows=16,match_mode=scan","median_s":0.001495648},{"instance":"full_cpu_avx2_hd128_bf16","params":"threads=1,chunk_tokens=1024,block_rows=16,match_mode=scan","median_s":0.0016041665000000001}]','2026-12-02T22:18:34.832Z');
INSERT INTO best_configs VALUES(4,1,1,'hd128_q8_kv2_bf16_p16_b1_c16384','mac','steady_clock',1,16384,8,2,128,'bf16',16,NULL,'',1,'threads=1,chunk_tokens=256,block_rows=16,match_mode=pruned;K=512,r=256,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04,group_hits=false',1.0007550019950572917,NULL,0.010000000000000000208,'[{"instance":"mac_cpu_avx2_hd128_bf16","params":"threads=1,chunk_tokens=256,block_rows=16,match_mode=pruned;K=512,r=256,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04,group_hits=false","median_s":1.0007550019950573},{"instance":"mac_cpu_avx2_hd128_bf16","params":"threads=1,chunk_tokens=1024,block_rows=16,match_mode=scan;K=2048,r=64,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04,group_hits=false","median_s":1},{"instance":"mac_cpu_avx2_hd128_bf16","params":"threads=1,chunk_tokens=256,block_rows=16,match_mode=scan;K=512,r=256,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04,group_hits=false","median_s":1.0012525544816309}]','2026-12-02T22:18:34.832Z');
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
  recorded_at         TEXT    NOT NULL, subtract_guard REAL NOT NULL DEFAULT 1e-04, group_hits INTEGER NOT NULL DEFAULT 0,
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
INSERT INTO key_formats VALUES('keys','faa43947f5ce5016');
CREATE TABLE IF NOT EXISTS "break_even" (
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
  status           TEXT    NOT NULL CHECK (status IN ('ok', 'ambiguous', 'never')),
  hit_rate         REAL,                  -- the smallest hit rate where MAC clearly wins
  speedup          REAL,                  -- full median / MAC median at that hit rate
  mac_instance_id  INTEGER REFERENCES instances(id),
  mac_params       TEXT    NOT NULL DEFAULT '',
  full_instance_id INTEGER REFERENCES instances(id),
  full_params      TEXT    NOT NULL DEFAULT '',
  notes            TEXT    NOT NULL DEFAULT '',
  decided_at       TEXT    NOT NULL,
  CHECK ((status = 'ok') = (hit_rate IS NOT NULL)),
  UNIQUE (device_id, bucket, policy)
);
INSERT INTO break_even VALUES(1,1,1,'hd128_q8_kv2_bf16_p16_b1_c4096','steady_clock',1,4096,8,2,128,'bf16',16,'','ok',1.0,2.8847317737987427932,1,'threads=1,chunk_tokens=256,block_rows=16,match_mode=pruned;K=512,r=256,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04,group_hits=false',2,'threads=1,chunk_tokens=256,block_rows=16,match_mode=pruned','interval=iqr; bracket=(0,1]; lag=uniform(1,64),coherence=per-head [ok] 0:0.93x:slower 1:2.88x:faster;','2026-12-02T22:18:34.831Z');
INSERT INTO break_even VALUES(2,1,1,'hd128_q8_kv2_bf16_p16_b1_c16384','steady_clock',1,16384,8,2,128,'bf16',16,'','ok',1.0,8.595473584444171422,1,'threads=1,chunk_tokens=256,block_rows=16,match_mode=pruned;K=512,r=256,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,accept_eps=1,min_context=0,subtract_guard=1e-04,group_hits=false',2,'threads=1,chunk_tokens=256,block_rows=16,match_mode=pruned','interval=iqr; bracket=[0,1]; lag=uniform(1,64),coherence=per-head [ok] 0:0.98x:tie 1:8.60x:faster;','2026-12-02T22:18:34.833Z');
CREATE INDEX measurements_by_workload ON measurements (device_id, workload_id);
CREATE INDEX measurements_by_instance ON measurements (instance_id);
CREATE VIEW measurements_view AS
SELECT m.id, d.digest AS device, d.backend, d.name AS device_name, d.arch, d.threads,
       b.git_revision, b.compiler, i.name AS instance, i.family, m.params,
       w.batch, w.context, w.q_heads, w.kv_heads, w.head_dim, w.kv_dtype, w.page_size,
       w.hit_rate, w.lag, w.coherence, w.ring_capacity, w.band, w.tau, w.pick, w.extra,
       m.policy, m.cold, m.status, m.error, m.median_s, m.q1_s, m.q3_s, m.min_s, m.max_s,
       m.mean_s, m.samples, m.rel_noise, m.stop_reason, m.modeled_bytes, m.clock_mhz,
       m.throttled_samples, m.notes, m.partial, m.kv_tokens_read, m.kv_tokens_total,
       r.run_key, r.shard_index, r.shard_count, m.started_at, m.finished_at
FROM measurements m
JOIN devices d ON d.id = m.device_id
JOIN builds b ON b.id = m.build_id
JOIN instances i ON i.id = m.instance_id
JOIN workloads w ON w.id = m.workload_id
LEFT JOIN runs r ON r.id = m.run_id;
COMMIT;
