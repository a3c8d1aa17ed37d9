import Deployment
import Edge
import Store

/// What a request presents as proof of a session.
package enum Credential: Equatable {
  /// Nothing at all.
  case none
  /// An `Authorization` field that is not `Bearer <token>`.
  case malformed
  /// A native client's token.
  case bearer(String)
  /// The browser's session cookie.
  case cookie(String)

  /// The credential in `request`: the `Authorization` field wins over the cookie. Two
  /// `Authorization` fields are malformed (RFC 9110 §11.6.2 allows one): never pick one.
  package init(_ request: Request) {
    let authorization = request.headers.firstValue(Self.authorization)
    if authorization.count > 1 {
      self = .malformed
    } else if let value = authorization.value {
      // `Bearer <token>`, the scheme in any case (RFC 9110 §11.1); read as bytes, since this runs
      // on the loop for every session read.
      if let space = value.firstIndex(of: UInt8(ascii: " ")), space + 1 < value.endIndex,
        Self.bearer.matches(value[..<space])
      {
        self = .bearer(String(decoding: value[(space + 1)...], as: UTF8.self))
      } else {
        self = .malformed
      }
    } else if let cookie = WebSecurity.cookie(WebSecurity.sessionCookie, in: request) {
      self = .cookie(cookie)
    } else {
      self = .none
    }
  }

  private static let authorization: FieldName = "authorization"
  /// The scheme, matched in any case like a field name.
  private static let bearer: FieldName = "bearer"

  /// Whether it is the browser's cookie.
  package var isCookie: Bool { if case .cookie = self { true } else { false } }

  /// The token, if any.
  package var token: String? {
    switch self {
    case .bearer(let t), .cookie(let t): t
    case .none, .malformed: nil
    }
  }
}

/// A live session and its account, and how the request proved it.
package struct Signed {
  package let session: SessionRecord
  package let account: Account
  package let token: String
}

/// Why a request is not let through as signed in. Its public answer is `AuthFailure.response`
/// (the client API's JSON).
public enum AuthFailure: Error, Equatable, Sendable {
  /// No credential at all.
  case missing
  /// An `Authorization` field that is not `Bearer <token>`.
  case malformed
  /// A credential that names no live session (unknown, expired, revoked, its account disabled).
  case invalidToken
  /// A `Band-Licence-Client` field that is not `ios/x.y.z` or `android/x.y.z`.
  case invalidClient
  /// A native app below its platform's minimum version.
  case appVersionUnsupported(minimum: String)
  /// A cookie-authenticated change without a same-origin `Origin` (the cookie travels with
  /// cross-site requests too; a change needs proof that it comes from our own page).
  case crossOrigin
}

/// The one answer to "who is asking?", for every surface — the JSON API, the pages, the native
/// sign-in — so that each authenticates exactly alike:
/// 1. the credential: a Bearer token (native apps) wins over the session cookie (browsers);
/// 2. `precheck`, decided before the store is read (on the loop, for cache hits too): nothing or a
///    malformed `Authorization` field, an unsupported app version, a cookie-authenticated change
///    from another origin;
/// 3. `signed`: the live session the token names, read through the store (and its session cache),
///    with the request's network kept as the session's "last used from".
/// Passwords are checked in one place too: `checkPassword` (PasswordCheck.swift).
package struct Authenticator: Sendable {
  /// The process's store connections, session lifetimes and password hasher.
  package let services: ClientServices
  /// The snapshot's deployment: its origin (for `Origin`) and the apps' minimum versions.
  package let deployment: Deployment

  package init(services: ClientServices, deployment: Deployment) {
    self.services = services
    self.deployment = deployment
  }

  /// The answer decided before the store is read, or nil to go on. `unsafe` is a method that
  /// changes something (RFC 9110 §9.2.1): for a cookie, it needs a same-origin `Origin`.
  package func precheck(_ request: Request, _ credential: Credential, unsafe: Bool) -> AuthFailure? {
    switch credential {
    case .none: return .missing
    case .malformed: return .malformed
    case .bearer:
      if let client = request.headers["band-licence-client"] { return appVersionFailure(client) }
    case .cookie:
      if unsafe,
        request.headers["origin"] == nil || !WebSecurity.sameOrigin(request, deployment: deployment)
      {
        return .crossOrigin
      }
    }
    return nil
  }

  /// `Band-Licence-Client: <platform>/<version>`: below the platform's minimum, or malformed.
  func appVersionFailure(_ header: String) -> AuthFailure? {
    // One rule for app versions, the handoff's: 2 or 3 parts of 1 to 6 ASCII digits.
    let parts = header.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
    guard parts.count == 2, ["ios", "android"].contains(parts[0]), PKCE.validAppVersion(String(parts[1]))
    else { return .invalidClient }
    let minimum = parts[0] == "ios" ? deployment.minimumIOSVersion : deployment.minimumAndroidVersion
    guard ClientStore.compareVersions(String(parts[1]), minimum) < 0 else { return nil }
    return .appVersionUnsupported(minimum: minimum)
  }

  /// The live session `credential` names, if any; `request` is where it was presented from (its
  /// network is kept as the session's "last used from", `ClientStore.networkHint`).
  package func signed(_ credential: Credential, _ store: ClientStore, from request: Request? = nil)
    throws(StoreError)
    -> Signed?
  {
    guard let token = credential.token,
      let (session, account) = try store.session(
        token: token, lifetimes: services.lifetimes, network: request.flatMap { services.network($0, store) })
    else { return nil }
    return Signed(session: session, account: account, token: token)
  }

  /// The live session `request` presents (whichever credential), read through `store`; nil when
  /// there is none. What a page asks: it answers a signed-out visitor itself.
  package func signed(_ request: Request, _ store: ClientStore) throws(StoreError) -> Signed? {
    try signed(Credential(request), store, from: request)
  }

  /// The live session `credential` names with its account and live memberships, in one statement
  /// (on a pool thread), kept for the loops (`cachedView`) in the change epoch taken before
  /// the read; nil when there is none.
  package func view(_ credential: Credential, _ store: ClientStore, from request: Request) throws(StoreError)
    -> SessionView?
  {
    guard let token = credential.token else { return nil }
    let epoch = services.viewCache.epochBeforeRead()
    guard
      let view = try store.sessionViews(
        tokens: [token], lifetimes: services.lifetimes, networks: [services.network(request, store)]
      )[0]
    else { return nil }
    if let epoch {
      let times = services.viewTimes(view.session)
      services.viewCache.store(
        view, for: Secrets.digest(token), epoch: epoch, validUntil: times.validUntil,
        refreshAt: times.refreshAt)
    }
    return view
  }

  /// What `view` read for `token`, while the database is unchanged since and the session's
  /// lifetimes allow (on the loop, under a short lock); nil sends the request to the pool. The first
  /// answer past the view's refresh time queues it to be read again (`SessionRefresher`), with
  /// `request`'s client address for the session's network hint.
  package func cachedView(_ token: String, for request: Request) -> SessionView? {
    let digest = Secrets.digest(token)
    guard
      let (view, refresh) = services.viewCache.answer(
        for: digest, now: services.clock(), claimingRefresh: true)
    else { return nil }
    if refresh {
      let address = ClientAddress.of(request, trustedProxies: services.trustedProxies)
      services.refresher.enqueue((token, address)) { [services] batch in services.refreshViews(batch) }
    }
    return view
  }

  /// Until when an answer read for `session` may be given again without the store: never past its
  /// end, nor past the moment its "last seen" is due to be written again (`seenResolution`), which
  /// is also when an idle session's end is checked afresh.
  package func answerableUntil(_ session: SessionRecord) -> Int {
    let idle = services.lifetimes.idle(session.kind)
    return min(session.expiresAt, session.lastSeenAt + min(idle, ClientStore.seenResolution))
  }
}
