import Accounts
import Deployment
import Edge
import Store
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

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
  var sessionCache: SessionCache<PrebuiltResponse> { services.sessionCache }
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

extension ClientContext {
  /// This worker thread's store connection (opened on first use).
  func store() throws(StoreError) -> ClientStore { try services.store() }

  /// Writes `message` to the outbox in `store`'s current transaction (sent once it commits).
  func mail(_ message: MailMessage, in store: ClientStore) throws(StoreError) {
    try store.enqueueMail(message, host: WebSecurity.host(of: deployment.origin))
  }

  /// The network hint of `request`'s client address (`ClientStore.networkHint`).
  func network(_ request: Request, _ store: ClientStore) -> String? { services.network(request, store) }

  /// An absolute link on the deployment's origin to `path` (with its query).
  func link(_ path: String) -> String { deployment.origin + path }

  /// The answer to a store failure, a plain sentence with the cause in the log only: an outage is
  /// a `503` with `Retry-After: 1`, so clients and balancers try again shortly; a rule the data
  /// refused (the state changed under the request, e.g. an invitation accepted meanwhile) is a
  /// `409`; anything else is a `500`.
  package static func storeFailure(_ error: any Error, html: Bool) -> Response {
    switch error as? StoreError {
    case .outage?:
      Log.event("error", "store_unavailable", [("error", "\(error)")])
      let message = "The service cannot reach its database just now. Please try again in a moment."
      let retry = [(name: "Retry-After", value: "1")]
      if html { return Response.text(.serviceUnavailable, message + "\n", headers: retry) }
      return JSONBody.error(.serviceUnavailable, "unavailable", message, headers: retry)
    case .refused?:
      Log.event("info", "store_refused", [("error", "\(error)")])
      let message = "That changed meanwhile, so nothing was done. Please reload and try again."
      if html { return Response.text(.conflict, message + "\n") }
      return JSONBody.error(.conflict, "conflict", message)
    case .failed?, nil:
      Log.event("error", "client_store", [("error", "\(error)")])
      let message = "Something went wrong on our side. Please try again."
      if html { return Response.text(.internalServerError, message + "\n") }
      return JSONBody.error(.internalServerError, "internal_error", message)
    }
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
