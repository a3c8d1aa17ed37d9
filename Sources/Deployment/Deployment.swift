/// Where a configuration runs.
public enum Environment: String, Sendable, CaseIterable {
  case development
  case staging
  case production
}

/// The non-sensitive capability flags of a deployment, in the contract's order.
public struct Capabilities: Equatable, Sendable {
  /// The flag names, in the order `/config` lists them.
  public static let names = [
    "nativeSignIn", "verifiedLinks", "codeScanning", "attendance", "scheduling", "studentManagement",
    "offlineSync", "subscriptions", "pdfReports",
  ]
  /// The defaults: the foundations the native apps have today.
  public static let defaults: [String: Bool] = [
    "nativeSignIn": true, "verifiedLinks": true, "codeScanning": true, "attendance": false,
    "scheduling": false,
    "studentManagement": false, "offlineSync": false, "subscriptions": false, "pdfReports": false,
  ]
  /// The capabilities an API core serves through band-edge's forward routes (`"forward"`). Each is
  /// on exactly while a forward route naming it is enabled, its upstream is enabled and no kill
  /// switch names it; `"capabilities"` may not set one by hand. The one list of them (see
  /// docs/configuration.md).
  public static let forwarded: Set<String> = ["attendance", "scheduling", "studentManagement"]

  /// Every flag's value.
  public var values: [String: Bool]

  /// The value of `name` (false for unknown names).
  public subscript(name: String) -> Bool { values[name] ?? false }
}

/// One immutable deployment identity: what `/config`, the link files and the shell's label come from.
public struct Deployment: Equatable, Sendable {
  public var environment: Environment
  /// scheme://host[:port], no path, no query, no trailing slash.
  public var origin: String
  /// Shown to people and returned by /config.
  public var label: String
  /// `<TEAMID>.<bundle id>` strings.
  public var appleAppIDs: [String]
  public var androidPackageName: String?
  public var androidFingerprints: [String]
  /// Approved verified-link paths (`/native/callback`, `/qr/*`).
  public var verifiedLinkPaths: [String]
  /// Capabilities after kill switches.
  public var capabilities: Capabilities
  /// Capabilities switched off server-side.
  public var killSwitches: [String]
  public var minimumIOSVersion: String
  public var minimumAndroidVersion: String
  /// Handoff code lifetime (120 s outside development).
  public var handoffLifetimeSeconds: Int
  /// `max-age` of the link files.
  public var linkFileMaxAge: Int
  /// Listen addresses from the file (command-line flags win).
  public var listen: [String]
  /// Limit overrides from the file, by flag name without dashes (command-line flags win).
  public var limits: [String: Double]
  /// TLS listeners, certificate and key from the file (command-line flags win).
  public var tls = TLSSettings()
  /// The IANA time zone server-rendered pages show times in (`"timezone"`, default `Europe/London`).
  public var timezone = "Europe/London"
  /// Where the store lives, as the file says it (`"database"`: `sqlite:DIR` or a libpq URI; the
  /// executable checks its form; `--database` and `BAND_LICENCE_DATABASE_URL` win).
  public var database: String? = nil
  /// How mail leaves (`"mail"`: the SMTP relay, the sender, its credentials); `--smtp` wins for
  /// the relay. Staging and production refuse to start without a relay and a sender.
  public var mail = MailSettings()
  /// The admin listener (`"admin"`: where `/metrics` is served, and to whom); flags win.
  public var admin = AdminSettings()
  /// The API cores forward routes go to (`"upstreams"`), by name.
  public var upstreams: [String: UpstreamSettings] = [:]
  /// The routes forwarded to an API core (`"forward"`), in the file's order.
  public var forwardRoutes: [ForwardRoute] = []

  /// Whether `route` is forwarded now: it is enabled, its upstream is enabled, and no kill switch
  /// names its capability. A route that is not is still routed, and answers 503 (docs/gateway.md).
  public func forwards(_ route: ForwardRoute) -> Bool {
    Self.forwards(route, upstreams: upstreams, killSwitches: killSwitches)
  }

  /// `forwards(_:)` before a `Deployment` exists (the loader derives the capabilities with it).
  static func forwards(_ route: ForwardRoute, upstreams: [String: UpstreamSettings], killSwitches: [String])
    -> Bool
  {
    route.enabled && upstreams[route.upstream]?.enabled == true
      && !(route.capability.map { killSwitches.contains($0) } ?? false)
  }

  /// The default label of each environment.
  public static func defaultLabel(_ environment: Environment) -> String {
    switch environment {
    case .development: "Development"
    case .staging: "Staging"
    case .production: "Production"
    }
  }
}

/// The file's `mail` object: `{"smtp": "smtp://relay:587", "from": "Band Licence <no-reply@...>",
/// "username": "...", "passwordFile": "/run/secrets/smtp"}`. The password is read from its file at
/// start and never printed.
public struct MailSettings: Sendable, Equatable {
  /// `smtp://host[:port]` (STARTTLS required unless the host is loopback) or `smtps://host[:port]`.
  public var smtp: String? = nil
  /// The `From` address (a bare address or `Name <address>`).
  public var from: String? = nil
  public var username: String? = nil
  public var passwordFile: String? = nil

  /// No mail settings.
  public init() {}
}

/// The file's `admin` object: `{"listen": "127.0.0.1:9901", "allow": ["10.0.0.0/8"]}`; the
/// executable checks the address and the networks.
public struct AdminSettings: Sendable, Equatable {
  public var listen: String? = nil
  public var allow: [String] = []

  public init() {}
}

/// The file's `tls` object: `{"listen": ["0.0.0.0:443"], "certificate": "...", "key": "..."}`.
public struct TLSSettings: Sendable, Equatable {
  public var listen: [String] = []
  public var certificate: String? = nil
  public var key: String? = nil

  public init() {}
}
