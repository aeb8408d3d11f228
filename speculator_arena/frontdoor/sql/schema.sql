-- The front door's operational state (accounts, token hashes, submissions, settings).
CREATE TABLE IF NOT EXISTS accounts (
    account_id  TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    kind        TEXT NOT NULL CHECK (kind IN ('participant', 'study_agent')),
    created_at  REAL NOT NULL,
    revoked_at  REAL
);

CREATE TABLE IF NOT EXISTS tokens (
    token_id     TEXT PRIMARY KEY,
    account_id   TEXT NOT NULL REFERENCES accounts(account_id),
    secret_hash  TEXT NOT NULL,
    created_at   REAL NOT NULL,
    revoked_at   REAL
);

CREATE TABLE IF NOT EXISTS submissions (
    submission_id     TEXT PRIMARY KEY,
    evaluation_id     TEXT NOT NULL UNIQUE,
    account_id        TEXT NOT NULL REFERENCES accounts(account_id),
    task_id           TEXT NOT NULL,
    split             TEXT NOT NULL,
    protocol_version  INTEGER NOT NULL,
    solution_kind     TEXT NOT NULL,
    solution_method   TEXT NOT NULL,
    engine_source     TEXT NOT NULL,
    engine_digest     TEXT NOT NULL,
    engine_dir        TEXT NOT NULL,
    speculator_source TEXT,
    speculator_digest TEXT,
    speculator_dir    TEXT,
    accepted_at       REAL NOT NULL,
    -- 'fetching' (a repository or hub speculator still to fetch: counted in the quota, never
    -- run), 'accepted' (sealed whole: the queue's), 'refused' (the fetch failed: refunded)
    intake_status     TEXT NOT NULL DEFAULT 'accepted',
    intake_reason     TEXT,
    intake_code       INTEGER,
    fetch_spec        TEXT,  -- JSON: what the fetch worker fetches
    fetch_owner       TEXT,  -- the API process fetching it (its pid), while it does
    fetch_started     REAL,
    -- LowBArena: the quantized checkpoint (`artifact`), sealed as a speculator is (NULL: none)
    artifact_source   TEXT,
    artifact_digest   TEXT,
    artifact_dir      TEXT
);

CREATE INDEX IF NOT EXISTS submissions_quota ON submissions (account_id, task_id, split);

-- Accounts made by POST /register: its per-client rate and its cap are counted here.
CREATE TABLE IF NOT EXISTS registrations (
    account_id  TEXT PRIMARY KEY REFERENCES accounts(account_id),
    client      TEXT NOT NULL,
    created_at  REAL NOT NULL
);

CREATE INDEX IF NOT EXISTS registrations_client ON registrations (client, created_at);

CREATE TABLE IF NOT EXISTS settings (
    key    TEXT PRIMARY KEY,
    value  TEXT NOT NULL
);
