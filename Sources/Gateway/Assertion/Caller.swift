import Accounts

/// Who a forwarded request is from and what they may do in its school: the part of an assertion
/// that says who, the same for every request of one session in one school with one role. Read
/// assertions are cached under it (`ReadAssertionCache`), so everything here that can change
/// between two requests of a session — the role, the app version — is part of that key.
public struct Caller: Hashable, Sendable {
  /// `sub`: the account's ID.
  public var account: String
  /// `sid`: the session's ID (its row's `ses_…` ID, never its token; see `init(session:…)`).
  public var session: String
  /// `school`: the school's ID, the one the request's path names.
  public var school: String
  /// `role`: the account's live role in that school.
  public var role: Role
  /// `chn`: how the session was started.
  public var channel: Channel
  /// `av`: the native app's `<platform>/<version>` (`ios/1.4.2`); nil for the web (no member).
  public var appVersion: String?

  /// The `chn` claim.
  public enum Channel: String, Sendable {
    /// A native app's Bearer session.
    case native
    /// A browser's cookie session.
    case web
  }

  /// A caller with every claim given.
  public init(
    account: String, session: String, school: String, role: Role, channel: Channel, appVersion: String?
  ) {
    self.account = account
    self.session = session
    self.school = school
    self.role = role
    self.channel = channel
    self.appVersion = appVersion
  }

  /// The caller of a live `session` acting in `school` as `role`; `client` is the request's
  /// `Band-Licence-Client` field, already checked by the authenticator's precheck.
  ///
  /// `sid` is the session's row ID, not its token: a random `ses_` identifier the account's owner
  /// already sees in `GET /session`'s list of devices and the audit trail already names. It proves
  /// nothing: a session is found only by the SHA-256 of its 256-bit token, and revoking one by ID
  /// needs the owner's own live session (or an operator). So an assertion that leaks from the API
  /// core's logs gives no one a way in, and the API core's audit can still name the same session
  /// as band-edge's.
  ///
  /// `av` is the native app's `Band-Licence-Client` value when it sent one, else the platform and
  /// version its session was started with; a web session has none, and the claim is left out.
  public init(session: SessionRecord, school: String, role: Role, client: String?) {
    let native = session.kind == .native
    let started = session.platform.flatMap { platform in session.appVersion.map { "\(platform)/\($0)" } }
    self.init(
      account: session.accountID, session: session.id, school: school, role: role,
      channel: native ? .native : .web, appVersion: native ? client ?? started : nil)
  }
}
