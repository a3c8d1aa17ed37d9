import Edge
import LinkAssoc
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// What lives as long as the process, whatever configuration is loaded: one store connection per
/// worker thread, the session cache, the rate limiters' buckets, password parameters and the
/// settings the flags fix at start. Built once by the composition and handed to every snapshot, so
/// a reload (SIGHUP) opens no connection and forgets no bucket.
public final class ClientServices: Sendable {
  let stores: ThreadLocal<ClientStore>
  let lifetimes: SessionLifetimes
  let hasher: PasswordHasher
  /// Epoch seconds (injectable for tests).
  let clock: @Sendable () -> Int
  /// Session answers the loops may send without the pool while the database is unchanged.
  let sessionCache: SessionCache
  /// On PostgreSQL with a session cache: the connection that hears of other instances' changes.
  public let listener: ChangeListener?
  /// On PostgreSQL: this instance's heartbeat, which sizes the rate limiters' share.
  public let heartbeat: FleetHeartbeat?
  /// With an SMTP relay: the outbox's sender.
  public let mailer: MailDelivery?
  /// Attempts per client address at `POST /sign-in` and `POST /native/sign-in` together.
  let signInLimiter: RateLimiter
  /// Attempts per client address at the native exchange.
  let exchangeLimiter: RateLimiter
  /// Peers whose `X-Forwarded-For` is believed.
  let trustedProxies: Set<String>
  /// How long a rate-limit refusal is held before it is sent (a tarpit; zero sends it at once).
  let refusalHold: Duration
  /// How many invitations may go out per hour, per inviter, school and address (fleet-wide: counted
  /// in the store).
  let invitationLimits: InvitationLimits

  /// The services over the SQLite database at `databasePath`.
  public convenience init(
    databasePath: String, lifetimes: SessionLifetimes, hasher: PasswordHasher = PasswordHasher(),
    sessionCacheEntries: Int = 4096, signInLimit: RateLimit = RateLimit(burst: 20, perMinute: 30),
    exchangeLimit: RateLimit = RateLimit(burst: 20, perMinute: 60), trustedProxies: Set<String> = [],
    refusalHold: Duration = .seconds(1), invitationLimits: InvitationLimits = InvitationLimits(),
    clock: @escaping @Sendable () -> Int
  ) {
    self.init(
      database: .sqlite(file: databasePath), lifetimes: lifetimes, hasher: hasher,
      sessionCacheEntries: sessionCacheEntries, signInLimit: signInLimit, exchangeLimit: exchangeLimit,
      trustedProxies: trustedProxies, refusalHold: refusalHold, invitationLimits: invitationLimits,
      clock: clock)
  }

  /// The services over the store at `database`, reached with `settings`. The loop-side session
  /// cache watches SQLite's WAL index, or on PostgreSQL a `ChangeListener` started here (on
  /// `settings.listenURI` when given).
  public init(
    database: DatabaseLocation, settings: DatabaseSettings = DatabaseSettings(), lifetimes: SessionLifetimes,
    hasher: PasswordHasher = PasswordHasher(),
    sessionCacheEntries: Int = 4096, signInLimit: RateLimit = RateLimit(burst: 20, perMinute: 30),
    exchangeLimit: RateLimit = RateLimit(burst: 20, perMinute: 60), trustedProxies: Set<String> = [],
    refusalHold: Duration = .seconds(1), invitationLimits: InvitationLimits = InvitationLimits(),
    smtp: SMTPSettings? = nil, clock: @escaping @Sendable () -> Int
  ) {
    let gate = ReconnectSchedule(settings)
    let listener: ChangeListener?
    switch database {
    case .sqlite: listener = nil
    case .postgres(let uri):
      listener =
        sessionCacheEntries > 0 ? ChangeListener(uri: settings.listenURI ?? uri, settings: settings) : nil
    }
    self.listener = listener
    stores = ThreadLocal {
      try gate.attempt { () throws(StoreError) in
        let opened = try database.open(settings, schedule: gate)
        // This process's own changes reach its cache at commit, before their notification returns.
        if let listener, let postgres = opened as? PostgresDatabase {
          postgres.afterAnnouncedCommit = { listener.changeCommitted() }
        }
        return try ClientStore(database: opened, clock: clock)
      }
    }
    self.lifetimes = lifetimes
    self.hasher = hasher
    self.clock = clock
    switch database {
    case .sqlite(let file): sessionCache = SessionCache(databasePath: file, capacity: sessionCacheEntries)
    case .postgres:
      sessionCache = SessionCache(capacity: listener == nil ? 0 : sessionCacheEntries) { listener }
    }
    signInLimiter = RateLimiter(signInLimit)
    exchangeLimiter = RateLimiter(exchangeLimit)
    // A fleet on PostgreSQL shares the per-address limits. (On SQLite a heartbeat's commit every
    // second would empty the session cache; one file serves one instance.)
    if case .postgres = database {
      heartbeat = FleetHeartbeat(
        database: database, settings: settings, limiters: [signInLimiter, exchangeLimiter], clock: clock)
    } else {
      heartbeat = nil
    }
    // Without a relay (development) mail stays in the outbox: `band-edge admin outbox`.
    mailer = smtp.map {
      MailDelivery(
        database: database, settings: settings, smtp: $0, interval: $0.interval, firstRetry: $0.firstRetry,
        clock: clock)
    }
    self.trustedProxies = trustedProxies
    self.refusalHold = refusalHold
    self.invitationLimits = invitationLimits
  }
}

/// What the API and the pages share in one snapshot: the process's services and what the
/// configuration determines (the deployment, the shell's stylesheet).
public struct ClientContext: Sendable {
  let services: ClientServices
  let deployment: Deployment
  /// The shell's fingerprinted stylesheet, for the server-rendered pages (nil: unstyled).
  let stylesheet: String?

  var stores: ThreadLocal<ClientStore> { services.stores }
  var lifetimes: SessionLifetimes { services.lifetimes }
  var hasher: PasswordHasher { services.hasher }
  var clock: @Sendable () -> Int { services.clock }
  var sessionCache: SessionCache { services.sessionCache }
  var signInLimiter: RateLimiter { services.signInLimiter }
  var exchangeLimiter: RateLimiter { services.exchangeLimiter }
  var trustedProxies: Set<String> { services.trustedProxies }
  var refusalHold: Duration { services.refusalHold }
  var invitationLimits: InvitationLimits { services.invitationLimits }

  /// A snapshot's context over the process's `services`.
  public init(services: ClientServices, deployment: Deployment, stylesheet: String? = nil) {
    self.services = services
    self.deployment = deployment
    self.stylesheet = stylesheet
  }

  /// A context with services of its own (for tests and one-off tools).
  public init(
    databasePath: String, deployment: Deployment, lifetimes: SessionLifetimes,
    hasher: PasswordHasher = PasswordHasher(), stylesheet: String? = nil, sessionCacheEntries: Int = 4096,
    signInLimit: RateLimit = RateLimit(burst: 20, perMinute: 30),
    exchangeLimit: RateLimit = RateLimit(burst: 20, perMinute: 60), trustedProxies: Set<String> = [],
    refusalHold: Duration = .seconds(1), clock: @escaping @Sendable () -> Int
  ) {
    self.init(
      services: ClientServices(
        databasePath: databasePath, lifetimes: lifetimes, hasher: hasher,
        sessionCacheEntries: sessionCacheEntries,
        signInLimit: signInLimit, exchangeLimit: exchangeLimit, trustedProxies: trustedProxies,
        refusalHold: refusalHold, clock: clock),
      deployment: deployment, stylesheet: stylesheet)
  }
}

/// What a request presents as proof of a session.
enum Credential: Equatable {
  /// Nothing at all.
  case none
  /// An `Authorization` field that is not `Bearer <token>`.
  case malformed
  /// A native client's token.
  case bearer(String)
  /// The browser's session cookie.
  case cookie(String)

  /// The credential in `request`: the `Authorization` field wins over the cookie.
  init(_ request: Request) {
    if let authorization = request.headers["authorization"] {
      // `Bearer <token>`, the scheme in any case (RFC 9110 §11.1); read as bytes, since this runs
      // on the loop for every session read.
      let bytes = authorization.utf8
      if let space = bytes.firstIndex(of: UInt8(ascii: " ")), bytes.index(after: space) != bytes.endIndex,
        bytes[..<space].elementsEqual("bearer".utf8, by: { $0 | 0x20 == $1 })
      {
        self = .bearer(String(authorization[authorization.utf8.index(after: space)...]))
      } else {
        self = .malformed
      }
    } else if let cookie = WebSecurity.cookie(WebSecurity.sessionCookie, in: request) {
      self = .cookie(cookie)
    } else {
      self = .none
    }
  }

  /// Whether it is the browser's cookie.
  var isCookie: Bool { if case .cookie = self { true } else { false } }

  /// The token, if any.
  var token: String? {
    switch self {
    case .bearer(let t), .cookie(let t): t
    case .none, .malformed: nil
    }
  }
}

/// A live session and its account.
struct Signed {
  let session: SessionRecord
  let account: Account
  let token: String
}

extension ClientContext {
  /// This worker thread's store connection (opened on first use).
  func store() throws(StoreError) -> ClientStore {
    do { return try stores.value() } catch let error as StoreError { throw error } catch {
      throw StoreError("\(error)")
    }
  }

  /// Writes `message` to the outbox in `store`'s current transaction (sent once it commits).
  func mail(_ message: MailMessage, in store: ClientStore) throws(StoreError) {
    try store.enqueueMail(message, host: WebSecurity.host(of: deployment.origin))
  }

  /// The network hint of `request`'s client address (`ClientStore.networkHint`).
  func network(_ request: Request, _ store: ClientStore) -> String? {
    store.networkHint(address: ClientAddress.of(request, trustedProxies: trustedProxies))
  }

  /// An absolute link on the deployment's origin to `path` (with its query).
  func link(_ path: String) -> String { deployment.origin + path }

  /// The live session `credential` names, if any; `request` is where it was presented from (its
  /// network is kept as the session's "last used from", `ClientStore.networkHint`).
  func signed(_ credential: Credential, _ store: ClientStore, from request: Request? = nil) throws(StoreError)
    -> Signed?
  {
    guard let token = credential.token,
      let (session, account) = try store.session(
        token: token, lifetimes: lifetimes, network: request.flatMap { network($0, store) })
    else { return nil }
    return Signed(session: session, account: account, token: token)
  }

  /// The 500 answer: a plain sentence, the cause in the error log only. A database out of reach
  /// for now is a 503 with `Retry-After: 1` instead, so clients and balancers try again shortly.
  static func storeFailure(_ error: any Error, html: Bool) -> Response {
    if let error = error as? StoreError, error.unavailable {
      Log.event("error", "store_unavailable", [("error", "\(error)")])
      let message = "The service cannot reach its database just now. Please try again in a moment."
      let retry = [(name: "Retry-After", value: "1")]
      if html { return Response.text(.serviceUnavailable, message + "\n", headers: retry) }
      return JSONBody.error(.serviceUnavailable, "unavailable", message, headers: retry)
    }
    Log.event("error", "client_store", [("error", "\(error)")])
    let message = "Something went wrong on our side. Please try again."
    if html { return Response.text(.internalServerError, message + "\n") }
    return JSONBody.error(.internalServerError, "internal_error", message)
  }
}

extension ClientContext {
  /// The loop-side check of a limited route: nil to go on to the pool, else the `429` (with
  /// `Retry-After` in whole seconds) that `refusal` builds from the wait, held for `refusalHold`.
  func limited(_ request: Request, by limiter: RateLimiter, refusal: (Int) -> Response) -> Response? {
    guard let wait = limiter.take(ClientAddress.of(request, trustedProxies: trustedProxies)) else {
      return nil
    }
    var response = refusal(wait)
    response.add("Retry-After", String(wait))
    // A flood that does not wait gets one answer per connection per hold, at the cost of a timer.
    if refusalHold > .zero { response.holdFor = refusalHold }
    return response
  }
}

/// Dates as the API and pages show them.
enum Timestamp {
  /// `2026-11-30T10:20:00Z` (RFC 3339, UTC).
  static func iso8601(_ epochSeconds: Int) -> String { Civil.rfc3339(epochSeconds) }
}

/// JSON responses of the client API.
enum JSONBody {
  static func response(_ status: Status, _ body: JSONValue, headers: [(name: String, value: String)] = [])
    -> Response
  {
    Response(
      status: status, headers: [("Content-Type", "application/json; charset=utf-8")] + headers,
      body: .bytes(body.canonicalBytes))
  }

  /// `{"error": code, "message": message}` (`APIError`).
  static func error(
    _ status: Status, _ code: String, _ message: String, headers: [(name: String, value: String)] = []
  )
    -> Response
  {
    APIError.response(status, code, message, headers: headers)
  }

  /// A request body read as JSON: its value (nil when it is not JSON, which each endpoint answers
  /// in its own words), or the 400 for an object naming a key twice (RFC 7493 §2.3).
  struct Parsed {
    let value: JSONValue?
    let refusal: Response?
  }

  /// `body` read as JSON (`Parsed`); `headers` go on the refusal.
  static func parse(_ body: [UInt8], headers: [(name: String, value: String)] = []) -> Parsed {
    do {
      return Parsed(value: try JSONValue.parse(body), refusal: nil)
    } catch .repeatedKey {
      return Parsed(
        value: nil,
        refusal: error(
          .badRequest, "invalid_request", "The body names a key more than once; send each key once.",
          headers: headers))
    } catch {
      return Parsed(value: nil, refusal: nil)
    }
  }
}
