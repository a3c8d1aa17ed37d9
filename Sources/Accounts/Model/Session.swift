/// A session as stored (never its token).
public struct SessionRecord: Equatable, Sendable {
  public let id: String
  public let accountID: String
  public let kind: Kind
  public let platform: String?
  public let appVersion: String?
  public let createdAt: Int
  public let lastSeenAt: Int
  public let expiresAt: Int
  public let revokedAt: Int?
  public let revokedReason: String?
  /// For a web session: the browser and system it was started from, as `BrowserLabel` names them
  /// from a fixed list of words ("Firefox on Linux"); never the User-Agent itself.
  public var browser: String? = nil
  /// The keyed digest of the network the session was started from (`networkHint`), never an
  /// address.
  public var network: String? = nil

  /// How the session was started: the web sign-in (a cookie) or a native app's exchange (a
  /// Bearer token). Each has its own idle and absolute lifetimes.
  public enum Kind: String, Sendable {
    case web
    case native
  }
}

/// How long sessions live, in seconds: a native or a web session ends once unused for its idle time
/// or at its lifetime, whichever comes first; all four are limits (docs/limits.md).
public struct SessionLifetimes: Sendable, Equatable {
  public var nativeIdle = 30 * 86400
  public var nativeAbsolute = 180 * 86400
  public var webIdle = 12 * 3600
  public var webAbsolute = 7 * 86400

  /// The contract's defaults.
  public init() {}

  /// The longest a session of `kind` lives unused.
  public func idle(_ kind: SessionRecord.Kind) -> Int { kind == .native ? nativeIdle : webIdle }

  /// The longest a session of `kind` lives at all.
  public func absolute(_ kind: SessionRecord.Kind) -> Int { kind == .native ? nativeAbsolute : webAbsolute }
}

/// What `GET /session` answers from: the live session, its account and the account's live
/// memberships. A class of constants: the loops' cache hands the same view to every request of the
/// session, and a copy of it is one reference, not a retain of each of its strings.
public final class SessionView: Sendable, Equatable {
  public let session: SessionRecord
  public let account: Account
  public let memberships: [Membership]

  public init(session: SessionRecord, account: Account, memberships: [Membership]) {
    self.session = session
    self.account = account
    self.memberships = memberships
  }

  public static func == (a: SessionView, b: SessionView) -> Bool {
    a === b || (a.session == b.session && a.account == b.account && a.memberships == b.memberships)
  }
}

/// Which sessions an operator means.
public enum SessionFilter: Sendable, Equatable {
  case account(email: EmailAddress)
  /// Every session of the account with this ID.
  case accountID(String)
  case all
  /// Native sessions of a platform, optionally only those with an app version below `version`.
  case platform(String, below: String?)
}
