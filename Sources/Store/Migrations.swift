/// The schema, as numbered migrations applied in order at start (`PRAGMA user_version` records how
/// many ran). A database newer than this build is refused rather than guessed at.
public enum Migrations {
  /// Migration N (1-based) is `steps[N - 1]`; each runs in its own transaction.
  public static let steps: [String] = [
    // 1: people, schools and their roles.
    """
    CREATE TABLE accounts (
      id TEXT PRIMARY KEY,
      email TEXT NOT NULL UNIQUE COLLATE NOCASE,
      display_name TEXT NOT NULL,
      password_hash TEXT NOT NULL,
      disabled INTEGER NOT NULL DEFAULT 0,
      created_at INTEGER NOT NULL
    );
    CREATE TABLE schools (
      id TEXT PRIMARY KEY,
      name TEXT NOT NULL,
      slug TEXT NOT NULL UNIQUE,
      created_at INTEGER NOT NULL
    );
    CREATE TABLE memberships (
      account_id TEXT NOT NULL REFERENCES accounts(id),
      school_id TEXT NOT NULL REFERENCES schools(id),
      role TEXT NOT NULL CHECK (role IN ('administrator', 'teacher', 'read_only')),
      created_at INTEGER NOT NULL,
      revoked_at INTEGER,
      PRIMARY KEY (account_id, school_id)
    );
    """,
    // 2: sessions (only token digests are stored) and the audit trail.
    """
    CREATE TABLE sessions (
      id TEXT PRIMARY KEY,
      token_digest BLOB NOT NULL UNIQUE,
      account_id TEXT NOT NULL REFERENCES accounts(id),
      kind TEXT NOT NULL CHECK (kind IN ('web', 'native')),
      platform TEXT,
      app_version TEXT,
      created_at INTEGER NOT NULL,
      last_seen_at INTEGER NOT NULL,
      expires_at INTEGER NOT NULL,
      revoked_at INTEGER,
      revoked_reason TEXT
    );
    CREATE INDEX sessions_account ON sessions(account_id);
    CREATE TABLE audit_events (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      at INTEGER NOT NULL,
      actor TEXT,
      action TEXT NOT NULL,
      subject TEXT,
      detail TEXT
    );
    """,
    // 3: native sign-in handoffs (codes stored as digests; the replayable answer sealed under a key
    // only the real client's verifier gives), lockout per email digest, account deletion.
    """
    CREATE TABLE handoffs (
      code_digest BLOB PRIMARY KEY,
      account_id TEXT NOT NULL REFERENCES accounts(id),
      challenge TEXT NOT NULL,
      state TEXT NOT NULL,
      platform TEXT NOT NULL,
      app_version TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      expires_at INTEGER NOT NULL,
      used_at INTEGER,
      idempotency_digest BLOB,
      request_digest BLOB,
      session_id TEXT,
      sealed_token BLOB
    );
    CREATE TABLE sign_in_failures (
      email_digest BLOB PRIMARY KEY,
      failures INTEGER NOT NULL,
      locked_until INTEGER NOT NULL DEFAULT 0
    );
    ALTER TABLE accounts ADD COLUMN deleted_at INTEGER;
    """,
    // 4: when a deleted account's personal fields were erased (after the retention window).
    """
    ALTER TABLE accounts ADD COLUMN erased_at INTEGER;
    """,
    // 5: when an email last failed, so that old failure counts can be forgotten.
    """
    ALTER TABLE sign_in_failures ADD COLUMN last_failure_at INTEGER NOT NULL DEFAULT 0;
    """,
    // 6: keys the server makes for itself (the identifier key HMACs typed emails before they are
    // stored). Failure counts were unsalted SHA-256 of what was typed, sometimes a password: they
    // cannot be re-keyed without that text, so they are dropped (a lock in progress ends early, once).
    """
    CREATE TABLE server_keys (
      name TEXT PRIMARY KEY,
      key BLOB NOT NULL,
      created_at INTEGER NOT NULL
    );
    DELETE FROM sign_in_failures;
    ALTER TABLE sign_in_failures RENAME COLUMN email_digest TO email_key;
    """,
    // 7: which browser a web session was started from (a label from a fixed list, for the account
    // page's list of sessions).
    """
    ALTER TABLE sessions ADD COLUMN browser TEXT;
    """,
    // 8: a fleet's shared state. `change_counter` (one row, made by the first change) is bumped
    // by every transaction that can change a session's answer (revocations, disabling,
    // memberships), so an instance that may have missed a change notification sees it within a
    // second; `job_runs` records when each periodic
    // job last ran, so the fleet runs it once per period; `instances` is each running instance's
    // heartbeat, so each applies its share of the per-address rate limits.
    """
    CREATE TABLE change_counter (
      id INTEGER PRIMARY KEY CHECK (id = 1),
      n INTEGER NOT NULL
    );
    CREATE TABLE job_runs (
      job TEXT PRIMARY KEY,
      last_run_at INTEGER NOT NULL
    );
    CREATE TABLE instances (
      id TEXT PRIMARY KEY,
      seen_at INTEGER NOT NULL
    );
    """,
    // 9: the account lifecycle. A verified flag; the mail outbox, written in the same
    // transaction as the action that causes each message, its body erased once delivered;
    // single-use action tokens (recovery, set-password, email change), kept as digests; and
    // invitations to a school.
    """
    ALTER TABLE accounts ADD COLUMN email_verified_at INTEGER;
    CREATE TABLE outbox (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      message_id TEXT NOT NULL UNIQUE,
      kind TEXT NOT NULL,
      to_address TEXT NOT NULL,
      subject TEXT NOT NULL,
      text_body TEXT,
      html_body TEXT,
      created_at INTEGER NOT NULL,
      attempts INTEGER NOT NULL DEFAULT 0,
      next_attempt_at INTEGER NOT NULL,
      claimed_until INTEGER NOT NULL DEFAULT 0,
      sent_at INTEGER,
      last_error TEXT
    );
    CREATE INDEX outbox_due ON outbox (sent_at, next_attempt_at);
    CREATE TABLE action_tokens (
      digest BLOB PRIMARY KEY,
      purpose TEXT NOT NULL CHECK (purpose IN ('recovery', 'set_password', 'email_change')),
      account_id TEXT NOT NULL REFERENCES accounts(id),
      email TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      expires_at INTEGER NOT NULL,
      used_at INTEGER
    );
    CREATE TABLE invitations (
      id TEXT PRIMARY KEY,
      school_id TEXT NOT NULL REFERENCES schools(id),
      email TEXT NOT NULL,
      role TEXT NOT NULL CHECK (role IN ('administrator', 'teacher', 'read_only')),
      invited_by TEXT NOT NULL,
      token_digest BLOB NOT NULL UNIQUE,
      created_at INTEGER NOT NULL,
      expires_at INTEGER NOT NULL,
      accepted_at INTEGER,
      revoked_at INTEGER,
      idempotency_key TEXT,
      request_digest BLOB
    );
    """,
    // 10: a credential change ends everything issued before it. Each account has a
    // credential epoch that every password change, reset, set-password, disabling, deletion and
    // email restore advances: handoff codes and invitations record the epoch they were made under
    // and are refused under another; trusted-device cookies are MACed over it and each is kept on
    // the server (capped per account). Action tokens gain `email_revert`, the way back that the
    // old address is sent when an email change takes effect (the table is made again: a CHECK
    // cannot be altered in SQLite).
    """
    ALTER TABLE accounts ADD COLUMN credential_epoch INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE handoffs ADD COLUMN credential_epoch INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE invitations ADD COLUMN inviter_epoch INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE trusted_devices (
      nonce_digest BLOB PRIMARY KEY,
      account_id TEXT NOT NULL REFERENCES accounts(id),
      created_at INTEGER NOT NULL,
      last_used_at INTEGER NOT NULL
    );
    CREATE INDEX trusted_devices_account ON trusted_devices (account_id);
    CREATE TABLE action_tokens_v10 (
      digest BLOB PRIMARY KEY,
      purpose TEXT NOT NULL CHECK (purpose IN ('recovery', 'set_password', 'email_change', 'email_revert')),
      account_id TEXT NOT NULL REFERENCES accounts(id),
      email TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      expires_at INTEGER NOT NULL,
      used_at INTEGER
    );
    INSERT INTO action_tokens_v10 (digest, purpose, account_id, email, created_at, expires_at, used_at)
      SELECT digest, purpose, account_id, email, created_at, expires_at, used_at FROM action_tokens;
    DROP TABLE action_tokens;
    ALTER TABLE action_tokens_v10 RENAME TO action_tokens;
    CREATE INDEX action_tokens_account ON action_tokens (account_id);
    CREATE INDEX invitations_inviter ON invitations (invited_by);
    """,
    // 11: the keyed digest of the network a session was started from (an IPv4 /24 or IPv6 /48
    // under the server's identifier key; never an address), so that the account page can say
    // "this network" or "another network".
    """
    ALTER TABLE sessions ADD COLUMN network TEXT;
    """,
    // 12: the gateway's signing keys (Ed25519), one row per key: its JWK thumbprint, the private
    // key sealed under the key-encryption key (a file outside the store; the kid is bound to the
    // sealed bytes), the public key in clear for the JWKS, when it was made, when it starts to sign
    // and when its successor starts to (no successor yet: NULL).
    """
    CREATE TABLE gateway_keys (
      kid TEXT PRIMARY KEY,
      sealed BLOB NOT NULL,
      public_x TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      signs_from INTEGER NOT NULL,
      replaced_at INTEGER
    );
    """,
    // 13: each change listener's acknowledgement (PostgreSQL): the last sync marker it heard, when
    // it last said it is listening (seconds, the database's clock) and the server process serving
    // its connection. A writer waits for them after a change of access
    // (`PostgresDatabase.awaitListeners`). Empty on SQLite, whose caches read the WAL index instead.
    """
    CREATE TABLE change_acks (
      listener TEXT PRIMARY KEY,
      seen INTEGER NOT NULL,
      at INTEGER NOT NULL,
      pid INTEGER NOT NULL
    );
    """,
  ]

  /// What PostgreSQL adds to a step, after the shared SQL: statement triggers that announce every
  /// write that can change a session's answer — by band-edge or by anyone else (an operator's SQL,
  /// a script) — advancing the change sequence and notifying the listeners in the writer's own
  /// transaction (a sequence, not a counter row: concurrent writers never conflict on it; it
  /// advances before the commit, and the notification, sent at the commit, says the rest). A session's last-seen time is not such a change (`UPDATE OF` leaves it out), nor
  /// is a copy into a new store (copy-store sets `band_edge.copying` for its transaction). On
  /// SQLite the loops watch the WAL index, which every commit changes.
  public static let postgresAdditions: [Int: String] = [
    8: """
    CREATE SEQUENCE band_edge_change_seq;
    CREATE FUNCTION band_edge_announce() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF coalesce(current_setting('band_edge.copying', true), '') <> 'on' THEN
        PERFORM nextval('band_edge_change_seq');
        PERFORM pg_notify('band_edge_changes', '');
      END IF;
      RETURN NULL;
    END $$;
    CREATE TRIGGER accounts_announce AFTER UPDATE OF id, email, display_name, disabled, deleted_at OR DELETE
      ON accounts FOR EACH STATEMENT EXECUTE FUNCTION band_edge_announce();
    CREATE TRIGGER schools_announce AFTER UPDATE OR DELETE
      ON schools FOR EACH STATEMENT EXECUTE FUNCTION band_edge_announce();
    CREATE TRIGGER memberships_announce AFTER INSERT OR UPDATE OR DELETE
      ON memberships FOR EACH STATEMENT EXECUTE FUNCTION band_edge_announce();
    CREATE TRIGGER sessions_announce AFTER UPDATE OF id, token_digest, account_id, expires_at, revoked_at OR DELETE
      ON sessions FOR EACH STATEMENT EXECUTE FUNCTION band_edge_announce();
    """,
    // The sync markers' own sequence: a marker never counts as a change.
    13: """
    CREATE SEQUENCE band_edge_sync_seq;
    """,
  ]

  /// The schema version this build writes.
  public static var latest: Int { steps.count }

  /// Applies every missing migration; refuses a database newer than `latest`.
  /// - Returns: the versions applied.
  @discardableResult
  public static func apply(to database: any Database, upTo target: Int = latest) throws(StoreError) -> [Int] {
    let current = try version(of: database)
    guard current <= latest else {
      throw StoreError.failed(
        "the database has schema version \(current) but this band-edge knows only up to \(latest); "
          + "run a newer band-edge or restore a matching backup")
    }
    var applied: [Int] = []
    for number in (current + 1)...max(current + 1, target) where number <= target {
      // Checked again under the write lock: another process starting at the same moment may have
      // applied this step already.
      let ran = try database.exclusiveTransaction(.migration) { () throws(StoreError) -> Bool in
        guard try version(of: database) == number - 1 else { return false }
        try database.execute(database.dialect.schema(steps[number - 1]))
        if database.dialect == .postgres, let addition = postgresAdditions[number] {
          try database.execute(addition)
        }
        try database.recordSchemaVersion(number)
        return true
      }
      if ran { applied.append(number) }
    }
    return applied
  }

  /// The schema version recorded in the database.
  public static func version(of database: any Database) throws(StoreError) -> Int {
    try database.schemaVersion()
  }
}
