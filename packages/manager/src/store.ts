import Database from 'better-sqlite3';

export type Db = Database.Database;

/** Schema migrations, applied in order once each (user_version counts them). */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE events (
     seq INTEGER PRIMARY KEY AUTOINCREMENT,
     at INTEGER NOT NULL,
     kind TEXT NOT NULL,
     subject TEXT NOT NULL,
     actor TEXT,
     operation_id TEXT,
     duration_ms REAL,
     data TEXT NOT NULL
   );
   CREATE TABLE operations (
     id TEXT PRIMARY KEY,
     fingerprint TEXT NOT NULL,
     status TEXT NOT NULL,
     result TEXT,
     created_at INTEGER NOT NULL,
     finished_at INTEGER
   );
   CREATE TABLE leases (
     grp TEXT PRIMARY KEY,
     phase TEXT,
     holder TEXT,
     status TEXT NOT NULL,
     reason TEXT,
     updated_at INTEGER NOT NULL
   );
   CREATE TABLE batches (
     id TEXT PRIMARY KEY,
     kind TEXT NOT NULL,
     role TEXT NOT NULL,
     model TEXT,
     state TEXT NOT NULL,
     reason TEXT,
     attempts INTEGER NOT NULL DEFAULT 0,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL,
     committed_at INTEGER
   );
   CREATE TABLE samples (
     batch_id TEXT NOT NULL REFERENCES batches(id),
     idx INTEGER NOT NULL,
     sample_id TEXT NOT NULL,
     input TEXT NOT NULL,
     output TEXT,
     PRIMARY KEY (batch_id, idx),
     UNIQUE (batch_id, sample_id)
   );
   CREATE TABLE results (
     batch_id TEXT NOT NULL REFERENCES batches(id),
     idx INTEGER NOT NULL,
     output TEXT NOT NULL,
     PRIMARY KEY (batch_id, idx)
   );`,
  // The operator's standing word per model (see OperatorIntentStore): `held` (drain_model / deactivate_model,
  // until activate_model) or `drained` (a role drain / deactivate, until the role's next activation).
  `CREATE TABLE operator_intents (
     role TEXT NOT NULL,
     model TEXT NOT NULL,
     intent TEXT NOT NULL,
     actor TEXT,
     operation_id TEXT,
     at INTEGER NOT NULL,
     PRIMARY KEY (role, model)
   );`,
  // Engines this control plane launched, kept so that a restart finds them (adoption, lease recovery), and the
  // target of a lease's transition, so that a restart can finish it.
  `CREATE TABLE engines (
     role TEXT NOT NULL,
     engine_id TEXT NOT NULL,
     model TEXT NOT NULL,
     model_path TEXT NOT NULL,
     base_url TEXT NOT NULL,
     processes TEXT NOT NULL,
     generation INTEGER NOT NULL,
     weight_version TEXT,
     memory TEXT NOT NULL,
     paused TEXT,
     updated_at INTEGER NOT NULL,
     PRIMARY KEY (role, engine_id)
   );
   ALTER TABLE leases ADD COLUMN target TEXT;`,
  // When a batch's last run began (sealed -> running): the console shows how long it queued and how long it ran.
  `ALTER TABLE batches ADD COLUMN started_at INTEGER;`,
  // The one process that writes this database (see DatabaseHolder): a second one is refused while it lives.
  `CREATE TABLE db_holder (
     id INTEGER PRIMARY KEY CHECK (id = 1),
     pid INTEGER NOT NULL,
     host TEXT NOT NULL,
     port INTEGER,
     proc_start TEXT,
     since INTEGER NOT NULL,
     heartbeat_at INTEGER NOT NULL,
     token TEXT NOT NULL
   );`,
  // Scale operations (see ScaleOperationStore): every state change is written before the engines move, so a
  // restart resumes what was running.
  `CREATE TABLE scale_ops (
     request_id TEXT PRIMARY KEY,
     role TEXT NOT NULL,
     model TEXT NOT NULL,
     status TEXT NOT NULL,
     data TEXT NOT NULL,
     created_at INTEGER NOT NULL
   );`,
  // The memory tags an engine holds (JSON), beside `memory`: a drain by the memory plan keeps some, and an adopted
  // engine must not be asked to resume a tag it still holds (SGLang's scheduler raises and the server dies).
  `ALTER TABLE engines ADD COLUMN resident_tags TEXT;`,
];

/** The manager's embedded database: audit events, operation ids, leases, deferred batches, operator intents,
 * launched engines. WAL so readers (console, admin API) never block the writer, and `synchronous = NORMAL`, which
 * under WAL loses no committed transaction on a process crash (only on power loss). */
export function openStore(path = ':memory:'): Db {
  const db = new Database(path);
  if (path !== ':memory:') db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
  const applied = db.pragma('user_version', { simple: true }) as number;
  for (let i = applied; i < MIGRATIONS.length; i++) {
    const sql = MIGRATIONS[i] as string;
    db.transaction(() => {
      db.exec(sql);
      db.pragma(`user_version = ${i + 1}`);
    })();
  }
  return db;
}
