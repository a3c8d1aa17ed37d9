import Edge
import Store

/// What a native exchange asks for (`POST /api/client/v1/native/exchange`): the one-time code,
/// its PKCE verifier, and the state, platform and app version the handoff was started with.
public struct ExchangeRequest: Sendable {
  public var code: String
  public var codeVerifier: String
  public var state: String
  public var platform: String
  public var appVersion: String
  /// The `Idempotency-Key` header, if any.
  public var idempotencyKey: String?
  /// SHA-256 of the request body: a retry must be byte-identical.
  public var bodyDigest: [UInt8]

  public init(
    code: String, codeVerifier: String, state: String, platform: String, appVersion: String,
    idempotencyKey: String?, bodyDigest: [UInt8]
  ) {
    self.code = code
    self.codeVerifier = codeVerifier
    self.state = state
    self.platform = platform
    self.appVersion = appVersion
    self.idempotencyKey = idempotencyKey
    self.bodyDigest = bodyDigest
  }
}

/// How an exchange ended.
public enum ExchangeOutcome: Equatable, Sendable {
  /// A new native session (or, for an identical retry, the same one again).
  case granted(token: String, session: SessionRecord)
  /// `invalid_grant`, whatever the reason (never told apart to the client).
  case invalidGrant
}

extension ClientStore {
  /// Stores a handoff for `accountID` and returns its code (256 random bits; only the digest is
  /// kept). It is bound to the challenge, state, platform and app version and to the account's
  /// credential epoch (a credential change voids it), lives `lifetime` seconds and can be
  /// exchanged once.
  public func createHandoff(
    accountID: String, challenge: String, state: String, platform: String, appVersion: String, lifetime: Int
  ) throws(StoreError) -> String {
    let code = Secrets.token()
    let now = clock()
    try db.transaction { () throws(StoreError) in
      let epoch = try credentialEpoch(accountID: accountID)
      try db.query(
        """
        INSERT INTO handoffs (code_digest, account_id, challenge, state, platform, app_version, created_at, expires_at,
          credential_epoch)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
        """,
        [
          .blob(Secrets.digest(code)), .text(accountID), .text(challenge), .text(state), .text(platform),
          .text(appVersion), .integer(Int64(now)), .integer(Int64(now + lifetime)), .integer(Int64(epoch)),
        ])
      try audit(actor: accountID, action: "handoff.created", subject: accountID, detail: platform)
    }
    return code
  }

  /// Exchanges a code, in one transaction. The first exchange that names a code uses it up,
  /// successful or not. A later one with the same `Idempotency-Key` and the same body, within the
  /// lifetime, gets the same session back (its token unsealed with the presented verifier); any
  /// other later use is a replay: the session issued from the code is revoked and audited. A code
  /// made before the account's last credential change is refused.
  public func exchange(_ request: ExchangeRequest, lifetimes: SessionLifetimes) throws(StoreError)
    -> ExchangeOutcome
  {
    try db.transaction { () throws(StoreError) -> ExchangeOutcome in
      let rows = try db.query(
        """
        SELECT account_id, challenge, state, platform, app_version, expires_at, used_at, idempotency_digest,
               request_digest, session_id, sealed_token, credential_epoch
        FROM handoffs WHERE code_digest = ?
        """, [.blob(Secrets.digest(request.code))])
      guard let row = rows.first else {
        db.note(.nativeExchanges, ExchangeMetric.invalidGrant.rawValue)
        return .invalidGrant
      }
      let accountID = row[0].text ?? ""
      let expiresAt = row[5].int ?? 0
      let now = clock()
      let keyDigest = request.idempotencyKey.map { Secrets.digest($0) }

      if case .integer = row[6] {
        // Used before: an identical retry gets the same answer; anything else is a replay.
        if let keyDigest, let storedKey = row[7].blob, Secrets.equal(keyDigest, storedKey),
          let storedBody = row[8].blob, Secrets.equal(request.bodyDigest, storedBody), now < expiresAt,
          case .text(let sessionID) = row[9], let sealed = row[10].blob,
          let token = Seal.open(sealed, key: Seal.key(verifier: request.codeVerifier)).map({
            String(decoding: $0, as: UTF8.self)
          }),
          let (session, _) = try session(token: token, lifetimes: lifetimes), session.id == sessionID
        {
          try audit(actor: accountID, action: "handoff.retried", subject: sessionID)
          return .granted(token: token, session: session)
        }
        if case .text(let sessionID) = row[9] {
          try revokeSession(id: sessionID, reason: "handoff_replayed", actor: "system")
        }
        try audit(actor: nil, action: "handoff.replayed", subject: accountID)
        return .invalidGrant
      }

      try db.query(
        "UPDATE handoffs SET used_at = ?, idempotency_digest = ?, request_digest = ? WHERE code_digest = ?",
        [
          .integer(Int64(now)), keyDigest.map { .blob($0) } ?? .null, .blob(request.bodyDigest),
          .blob(Secrets.digest(request.code)),
        ])
      let account = try account(id: accountID)
      guard now < expiresAt, PKCE.validVerifier(request.codeVerifier),
        PKCE.matches(verifier: request.codeVerifier, challenge: (row[1].text ?? "")),
        Secrets.equal(Array(request.state.utf8), Array((row[2].text ?? "").utf8)),
        request.platform == (row[3].text ?? ""),
        request.appVersion == (row[4].text ?? ""), let account, !account.disabled,
        row[11] == .integer(Int64(try credentialEpoch(accountID: account.id)))
      else {
        try audit(actor: nil, action: "handoff.refused", subject: accountID)
        return .invalidGrant
      }
      let token = Secrets.token()
      let session = try createSession(
        accountID: account.id, kind: .native, platform: request.platform, appVersion: request.appVersion,
        token: token, lifetimes: lifetimes)
      let sealed = Seal.seal(Array(token.utf8), key: Seal.key(verifier: request.codeVerifier))
      try db.query(
        "UPDATE handoffs SET session_id = ?, sealed_token = ? WHERE code_digest = ?",
        [.text(session.id), sealed.map { .blob($0) } ?? .null, .blob(Secrets.digest(request.code))])
      try audit(actor: account.id, action: "sign_in.succeeded", subject: session.id, detail: "native")
      return .granted(token: token, session: session)
    }
  }
}
