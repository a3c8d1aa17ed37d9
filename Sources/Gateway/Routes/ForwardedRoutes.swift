import Accounts
import ClientAPI
import Deployment
import Edge
import Store

/// The routes of the configuration's `"forward"` array: one pooled, private route per path and
/// method, each checking the caller in band-edge before anything goes to the API core
/// (docs/gateway.md, "What band-edge checks"), then handing the loop an `UpstreamCall` whose head
/// carries the signed assertion.
public struct ForwardedRoutes: Sendable {
  let services: ClientServices
  let deployment: Deployment
  let gateway: GatewayServices
  let signer: AssertionSigner
  /// Built once: made per request, it would copy the deployment, with a retain and a release of each
  /// of its fields, twice for every request a loop checks.
  let authenticator: Authenticator

  /// The forwarded routes of `deployment`, over the process's `services` and `gateway`.
  public init(services: ClientServices, deployment: Deployment, gateway: GatewayServices) throws(GatewayError)
  {
    self.services = services
    self.deployment = deployment
    self.gateway = gateway
    signer = try AssertionSigner(issuer: deployment.origin)
    authenticator = Authenticator(services: services, deployment: deployment)
  }

  /// One route per configured path and method (HEAD through GET's route, as the router answers it).
  /// A read whose caller the loop already knows (`Authenticator.cachedView`) is checked and sent
  /// upstream from the loop; everything else goes to the pool.
  public var routes: [Route] { deployment.forwardRoutes.flatMap { routes(for: $0) } }

  private func routes(for forward: ForwardRoute) -> [Route] {
    let prepared = Prepared(forward, deployment: deployment)
    let onLoop: @Sendable (Request) -> Response? = { request in
      let response = cached(request, prepared)
      if let response { GatewayMetrics.process.count(response) }
      return response
    }
    return ForwardRoute.methodOrder.filter { forward.methods[$0] != nil }.map { method in
      Route(
        method, forward.path, cacheClass: .private, execution: .pooled,
        body: ForwardedRefusal.bodyPolicy(forward, method: method),
        fastPath: ForwardRoute.mutatingMethods.contains(method) ? nil : onLoop
      ) { request in
        GatewayMetrics.process.counted(handle(request, prepared))
      }
    }
  }

  /// One forward route with what every request through it shares. A class: it is passed down every
  /// check of every request, and a struct of this size was copied (each of its references retained
  /// and released) at each step.
  final class Prepared: Sendable {
    let route: ForwardRoute
    /// The core's settings, nil when the configuration names none (the loader refuses that).
    let upstream: UpstreamSettings?
    /// Whether the route is forwarded now (its switch, its core's, the capability's kill switch).
    let forwarded: Bool
    let head: UpstreamHead.Settings?

    init(_ route: ForwardRoute, deployment: Deployment) {
      self.route = route
      upstream = deployment.upstreams[route.upstream]
      forwarded = deployment.forwards(route)
      head = upstream.map { ForwardedRoutes.headSettings($0, origin: deployment.origin) }
    }
  }

  /// The checks in order (docs/gateway.md), on the pool; every refusal is the client API's JSON
  /// error. One store read gives the session, its account and its live memberships, and is kept
  /// for the loops.
  func handle(_ request: Request, _ prepared: Prepared) -> Response {
    let credential = Credential(request)
    if let early = beforeTheStore(request, prepared, credential) { return early }
    do {
      let store = try services.store()
      guard let view = try authenticator.view(credential, store, from: request) else {
        return AuthFailure.invalidToken.response
      }
      gateway.audits.write(to: store)
      return checked(request, prepared, view)
    } catch {
      return ClientContext.storeFailure(error, html: false)
    }
  }

  /// The same checks on the loop, for a read: the answers that need no store, and callers the
  /// loop has a live view of; nil sends the request to the pool (`handle`).
  func cached(_ request: Request, _ prepared: Prepared) -> Response? {
    let credential = Credential(request)
    if let early = beforeTheStore(request, prepared, credential) { return early }
    guard let token = credential.token, let view = authenticator.cachedView(token, for: request) else {
      return nil
    }
    return checked(request, prepared, view)
  }

  /// What is decided before the caller is known: the route switched off, a body past its limit, a
  /// path or `Connection` field the core could read otherwise, and the authenticator's precheck.
  func beforeTheStore(_ request: Request, _ prepared: Prepared, _ credential: Credential) -> Response? {
    guard prepared.forwarded, prepared.upstream != nil, prepared.head != nil else {
      return ForwardedAnswer.fault(.disabled, requestID: nil)
    }
    if let refusal = ForwardedRefusal.pastLimit(request, prepared.route)
      ?? ForwardedRefusal.ambiguousPath(request) ?? ForwardedRefusal.connectionNamesChecked(request)
    {
      return refusal
    }
    let mutating = ForwardRoute.mutatingMethods.contains(request.method)
    return authenticator.precheck(request, credential, unsafe: mutating)?.response
  }

  /// The checks on a known caller: school access and role, `since`, the rate limits and the
  /// `Idempotency-Key`; then the call upstream.
  func checked(_ request: Request, _ prepared: Prepared, _ view: SessionView) -> Response {
    let route = prepared.route
    guard let head = prepared.head else { return ForwardedAnswer.fault(.disabled, requestID: nil) }
    let caller: Caller
    switch access(request, route, view) {
    case .failure(let refusal): return refusal.response
    case .success(let granted): caller = granted
    }
    if let refusal = ForwardedRefusal.since(route, caller) { return refusal }
    let (address, peerTrusted) = ClientAddress.resolve(request, trustedProxies: services.trustedProxies)
    if let wait = gateway.limited(address: address, account: caller.account) {
      return ForwardedRefusal.rateLimited(wait, hold: services.refusalHold)
    }
    var key: String? = nil
    if ForwardRoute.mutatingMethods.contains(request.method) {
      guard let valid = IdempotencyKey(of: request) else { return ForwardedRefusal.idempotencyKey }
      key = valid.description
    }
    return call(
      request, prepared, head: head, caller: caller, client: address, peerTrusted: peerTrusted,
      idempotencyKey: key)
  }

  /// The caller in the path's school, or the refusal: 404 for a school they are not a live member
  /// of, 403 for a role below the route's for the method.
  func access(_ request: Request, _ route: ForwardRoute, _ view: SessionView) -> Result<
    Caller, ForwardedRefusal
  > {
    let least =
      route.minimumRole(for: request.method).flatMap { Role(rawValue: $0.rawValue) } ?? .administrator
    let schoolID = request.parameters["schoolId"] ?? ""
    switch SchoolAccess.check(view.memberships, schoolID: schoolID, need: .atLeast(least)) {
    case .notFound: return .failure(.notMember)
    case .forbidden: return .failure(.forbidden(least))
    case .granted(let membership):
      return .success(
        Caller(
          session: view.session, school: membership.school.id, role: membership.role,
          client: request.headers["band-licence-client"]))
    }
  }

  /// The upstream call: the assertion, the head, and how the answer comes back.
  func call(
    _ request: Request, _ prepared: Prepared, head settings: UpstreamHead.Settings, caller: Caller,
    client: String, peerTrusted: Bool, idempotencyKey: String?
  ) -> Response {
    let route = prepared.route
    let requestID = GatewayServices.requestID()
    let now = gateway.clock()
    guard let key = gateway.keys.signingKey(at: now) else {
      Log.event("error", "gateway_no_key", [("route", route.path)])
      return ForwardedAnswer.fault(.outOfResources, requestID: requestID)
    }
    let assertion: String
    do {
      if let idempotencyKey {
        let binding = WriteRequest(
          method: request.method.rawValue, target: request.originForm,
          bodyHash: WriteRequest.bodyHash(request.body),
          idempotencyKey: idempotencyKey, requestID: requestID)
        assertion = try signer.write(caller, audience: route.upstream, request: binding, key: key, now: now)
      } else if let cache = try? gateway.readCaches.value() {
        assertion = try signer.read(caller, audience: route.upstream, key: key, now: now, cache: cache)
      } else {
        assertion = try Assertion.compact(
          claims: signer.claims(caller, audience: route.upstream, now: now), key: key)
      }
    } catch {
      Log.event("error", "gateway_sign_failed", [("error", error.description)])
      return ForwardedAnswer.fault(.outOfResources, requestID: requestID)
    }
    guard
      let head = UpstreamHead(
        request, settings: settings, client: client,
        via: peerTrusted ? request.headers.combined("via") : nil, requestID: requestID, assertion: assertion)
    else { return ForwardedRefusal.unwritable }
    let audit = idempotencyKey.flatMap { key in
      route.audit.map { event in
        AuditQueue.Event(
          actor: caller.account, action: event, subject: caller.school,
          detail: "route \(route.path); request \(requestID); idempotency key \(key)")
      }
    }
    let answer = ForwardedAnswer(
      requestID: requestID, origin: deployment.origin, audit: audit, queue: gateway.audits)
    return .forward(
      UpstreamCall(
        upstream: route.upstream, method: request.method, head: head.bytes, body: request.body,
        answer: { answer.answer($0) }))
  }

  /// `Host` for the core, and the public scheme and host for `Forwarded`.
  static func headSettings(_ upstream: UpstreamSettings, origin: String) -> UpstreamHead.Settings {
    let authority: String
    switch upstream.target {
    case .http(let host, let port), .https(let host, let port):
      authority = (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
    case .unix: authority = upstream.name
    }
    let parts = origin.split(separator: "://", maxSplits: 1)
    return UpstreamHead.Settings(
      authority: authority, publicScheme: parts.count == 2 ? String(parts[0]) : "https",
      publicHost: parts.count == 2 ? String(parts[1]) : origin)
  }
}
