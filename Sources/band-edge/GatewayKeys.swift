import Accounts
import Deployment
import Edge
import Gateway
import Store

#if canImport(Glibc)
  import Glibc
#endif

/// The gateway's key-encryption key and signing keys, as `serve` and `admin keys rotate` find
/// them: the KEK file `--key-encryption-key` names (also `BAND_LICENCE_KEK_FILE`); in development
/// without one, `gateway-kek` beside the SQLite store, made (0600) when missing. Outside
/// development a missing or unusable file is refused, never replaced.
struct GatewayKeys: Sendable {
  /// The file's name in the data directory (development).
  static let developmentFile = "gateway-kek"

  let kek: KeyEncryptionKey
  let gateway: GatewayServices

  /// The KEK file's path: `flag`, else `BAND_LICENCE_KEK_FILE`, else in development the data
  /// directory's `gateway-kek`; nil when there is none.
  static func path(flag: String?, environment: Environment, store: DatabaseLocation) -> String? {
    if let given = flag ?? ProcessEnvironment.value("BAND_LICENCE_KEK_FILE"), !given.isEmpty { return given }
    guard environment == .development, let file = store.sqlitePath, let slash = file.lastIndex(of: "/") else {
      return nil
    }
    return file[..<slash] + "/" + developmentFile
  }

  /// The KEK at `path`: made there first in development, else read as it is.
  static func kek(path: String, environment: Environment) throws(GatewayError) -> KeyEncryptionKey {
    environment == .development ? try .createIfAbsent(path: path) : try .load(path: path)
  }

  /// The keys at start: the KEK, the store's first key made now if it has none (once for a fleet),
  /// and the services every snapshot's gateway routes share. Nil when there are no forward routes, or
  /// in development when there is no KEK (PostgreSQL without `--key-encryption-key`) or the keys do
  /// not open with it: nothing is forwarded then. Outside development either is an error.
  static func start(
    flag: String?, deployment: Deployment, store location: DatabaseLocation, services: ClientServices,
    limits: (address: RateLimit, account: RateLimit) = (
      GatewayServices.addressLimit, GatewayServices.accountLimit
    )
  ) throws -> GatewayKeys? {
    let development = deployment.environment == .development
    guard let path = path(flag: flag, environment: deployment.environment, store: location) else {
      guard deployment.forwardRoutes.isEmpty else {
        guard development else { throw GatewayError.keyFile(path: "(none)", reason: missing) }
        return off("no key-encryption key: " + missing)
      }
      return nil
    }
    let kek: KeyEncryptionKey
    let ring: KeyRing
    do {
      kek = try self.kek(path: path, environment: deployment.environment)
      ring = try GatewayKeyStore(store: try services.store(), kek: kek).ensureFirstKey(now: Int(time(nil)))
    } catch {
      // Outside development a key that does not open stops the start; in development (a store
      // copied without its KEK, say) the rest serves, and the forwarded routes are left out.
      guard development, !deployment.forwardRoutes.isEmpty else { throw error }
      return off("\(error)")
    }
    let gateway = GatewayServices(
      ring: ring, addressLimit: limits.address, accountLimit: limits.account, clock: { Int(time(nil)) })
    return GatewayKeys(kek: kek, gateway: gateway)
  }

  /// In development only: no route is forwarded, and the log says why (`gateway_off`).
  private static func off(_ reason: String) -> GatewayKeys? {
    Log.event("warning", "gateway_off", [("reason", reason)])
    return nil
  }

  /// How often a serving instance reads its keys again (and rotates when due), by default
  /// (`gateway-keys-refresh`).
  static let refreshInterval = Duration.seconds(60)

  /// Keeps the keys current while serving: every `interval`, on a connection of its own, the
  /// store's keys are read again, and replaced first when the newest is `rotationAge` old (once for
  /// a fleet: decided under the keys' lock). So a rotation, on the schedule or by `admin keys
  /// rotate` on any instance, is published here within an interval, long before its activation
  /// delay lets it sign, without a reload. While the store does not answer, the keys held stay.
  func keepCurrent(database: DatabaseLocation, settings: DatabaseSettings, interval: Duration) {
    let (kek, gateway) = (self.kek, self.gateway)
    StoreLoop.start(
      database: database, settings: settings, clock: { Int(time(nil)) }, interval: interval,
      events: ("gateway_keys_unread", "gateway_keys_read"), stopped: { false },
      step: { store in
        let keys = GatewayKeyStore(store: store, kek: kek)
        let now = Int(time(nil))
        let ring = try keys.ring()
        gateway.replace(ring.rotationDue(at: now) ? try keys.rotateIfDue(now: now, actor: "schedule") : ring)
      })
  }

  /// Writes the audit events of accepted forwarded mutations every `interval`, on a connection of
  /// its own, so an event waits at most that long for the store even when no request follows.
  func writeAudits(database: DatabaseLocation, settings: DatabaseSettings, interval: Duration = .seconds(1)) {
    let gateway = self.gateway
    StoreLoop.start(
      database: database, settings: settings, clock: { Int(time(nil)) }, interval: interval,
      events: ("gateway_audit_unwritten", "gateway_audit_written"), stopped: { false },
      step: { store in gateway.writeAudits(to: store) })
  }

  /// Why forward routes cannot be served without a KEK.
  static let missing =
    "is needed to forward routes outside development (and in development on PostgreSQL, which has "
    + "no data directory to keep one in): start serve with --key-encryption-key FILE (or BAND_LICENCE_KEK_FILE)"

  /// Reads the keys again (at a reload: a rotation by `admin keys rotate` is published from then);
  /// on failure the keys held stay, and the log says why.
  func refresh(_ services: ClientServices) {
    do {
      gateway.replace(try GatewayKeyStore(store: try services.store(), kek: kek).ring())
    } catch {
      Log.event("error", "gateway_keys_unread", [("error", "\(error)")])
    }
  }

  /// The gateway's routes in a snapshot of `deployment`: the forwarded routes and the JWKS.
  static func routes(_ keys: GatewayKeys?, deployment: Deployment, services: ClientServices) throws -> [Route]
  {
    guard let keys else {
      // Without keys nothing is forwarded: refused outside development, left out in development
      // (where the start logged `gateway_off`).
      guard deployment.forwardRoutes.isEmpty || deployment.environment == .development else {
        throw GatewayError.keyFile(path: "(none)", reason: missing)
      }
      return []
    }
    let forwarded = try ForwardedRoutes(services: services, deployment: deployment, gateway: keys.gateway)
    return forwarded.routes + [JWKSRoute.route(keys.gateway)]
  }
}
