import Deployment
import Edge

/// The verified-link files and the public bootstrap a deployment implies, generated once per
/// snapshot as canonical JSON (sorted keys, no whitespace, no BOM): byte-stable.
public struct LinkFiles: Sendable {
  /// `apple-app-site-association`.
  public let apple: [UInt8]
  /// `assetlinks.json`.
  public let android: [UInt8]
  /// `GET /api/client/v1/config`.
  public let clientConfig: [UInt8]

  /// Apple and Google fetch at most this much.
  public static let maxBytes = 128 * 1024

  /// The files for `deployment`.
  public init(_ deployment: Deployment) {
    apple = Self.appleFile(deployment).canonicalBytes
    android = Self.androidFile(deployment).canonicalBytes
    clientConfig = Self.clientConfigDocument(deployment).canonicalBytes
  }

  /// applinks.details with each app ID and one component per approved path, and webcredentials
  /// for the sign-in callback. With verified links off: no details and no apps.
  static func appleFile(_ d: Deployment) -> JSONValue {
    let on = d.capabilities["verifiedLinks"] && !d.appleAppIDs.isEmpty
    let components: [JSONValue] = d.verifiedLinkPaths.map { path in
      .object(["/": .string(path), "comment": .string("Band Licence verified link")])
    }
    let details: [JSONValue] =
      on
      ? [.object(["appIDs": .array(d.appleAppIDs.map { .string($0) }), "components": .array(components)])]
      : []
    return .object([
      "applinks": .object(["details": .array(details)]),
      "webcredentials": .object(["apps": .array(on ? d.appleAppIDs.map { .string($0) } : [])]),
    ])
  }

  /// One statement for the Android app: URL handling and sign-in credential sharing.
  static func androidFile(_ d: Deployment) -> JSONValue {
    guard d.capabilities["verifiedLinks"], let package = d.androidPackageName, !d.androidFingerprints.isEmpty
    else {
      return .array([])
    }
    return .array([
      .object([
        "relation": .array([
          .string("delegate_permission/common.get_login_creds"),
          .string("delegate_permission/common.handle_all_urls"),
        ]),
        "target": .object([
          "namespace": .string("android_app"), "package_name": .string(package),
          "sha256_cert_fingerprints": .array(d.androidFingerprints.map { .string($0) }),
        ]),
      ])
    ])
  }

  /// The public bootstrap of client contract v2: non-sensitive deployment facts only.
  static func clientConfigDocument(_ d: Deployment) -> JSONValue {
    var capabilities: [String: JSONValue] = [:]
    for name in Capabilities.names { capabilities[name] = .bool(d.capabilities[name]) }
    return .object([
      "contractVersion": .number(2),
      "appName": .string("Band Licence"),
      "origin": .string(d.origin),
      "deployment": .object(["environment": .string(d.environment.rawValue), "label": .string(d.label)]),
      "paths": .object([
        "signIn": .string("/native/sign-in"), "exchange": .string("/api/client/v1/native/exchange"),
        "session": .string("/api/client/v1/session"), "account": .string("/account"),
        "deletion": .string("/account/delete"),
      ]),
      "handoff": .object([
        "codeChallengeMethods": .array([.string("S256")]),
        "lifetimeSeconds": .number(Double(d.handoffLifetimeSeconds)),
      ]),
      "verifiedLinkPaths": .array(
        d.capabilities["verifiedLinks"] ? d.verifiedLinkPaths.map { .string($0) } : []),
      "capabilities": .object(capabilities),
      "minimumAppVersion": .object([
        "ios": .string(d.minimumIOSVersion), "android": .string(d.minimumAndroidVersion),
      ]),
    ])
  }

  /// The link-file routes and `/api/client/v1/config`, each a prebuilt answer with a strong ETag.
  public func routes(maxAge: Int) -> [Route] {
    let linkClass = CacheClass.linkFile(maxAge: maxAge)
    let appleFile = Self.static(apple, contentType: "application/json", cacheClass: linkClass)
    let androidFile = Self.static(android, contentType: "application/json", cacheClass: linkClass)
    let config = Self.static(
      clientConfig, contentType: "application/json; charset=utf-8", cacheClass: .private)
    return [
      Route(.get, "/.well-known/apple-app-site-association", cacheClass: linkClass, handler: appleFile),
      Route(.get, "/apple-app-site-association", cacheClass: linkClass, handler: appleFile),
      Route(.get, "/.well-known/assetlinks.json", cacheClass: linkClass, handler: androidFile),
      Route(.get, "/api/client/v1/config", cacheClass: .private, handler: config),
    ]
  }

  /// A handler answering `bytes` (prebuilt once), or 304 when If-None-Match names its ETag.
  static func `static`(_ bytes: [UInt8], contentType: String, cacheClass: CacheClass)
    -> @Sendable (Request) -> Response
  {
    let etag = "\"" + String(etagDigest(bytes)) + "\""
    let ok = PrebuiltResponse(
      Response(
        status: .ok,
        headers: [("Content-Type", contentType), ("ETag", etag), ("X-Content-Type-Options", "nosniff")],
        body: .bytes(bytes)), cacheClass: cacheClass)
    let notModified = PrebuiltResponse(
      Response(status: .notModified, headers: [("ETag", etag)]), cacheClass: cacheClass)
    return { request in
      let condition = evaluatePreconditions(
        ifNoneMatch: request.headers.combined("if-none-match"), ifModifiedSince: nil, etag: etag,
        lastModified: nil)
      return condition == .notModified ? notModified.response : ok.response
    }
  }

  /// A stable digest of the bytes for the ETag (two FNV-1a 64 passes with different seeds): an
  /// identity for caching, not a security property.
  static func etagDigest(_ bytes: [UInt8]) -> String {
    var a: UInt64 = 0xcbf2_9ce4_8422_2325
    var b: UInt64 = 0x8422_2325_cbf2_9ce4
    for byte in bytes {
      a = (a ^ UInt64(byte)) &* 0x100_0000_01b3
      b = (b ^ UInt64(byte)) &* 0x100_0000_01b3 &+ 1
    }
    return String(a, radix: 16) + String(b, radix: 16)
  }
}
