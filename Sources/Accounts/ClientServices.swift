import Deployment
import Edge
import Store
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// What lives as long as the process, whatever configuration is loaded: one store connection per
/// worker thread, the session cache, the rate limiters' buckets, password parameters and the
/// settings the flags fix at start. Built once by the composition and handed to every snapshot, so
/// a reload (SIGHUP) opens no connection and forgets no bucket.
public final class ClientServices: Sendable {
  package let stores: ThreadLocal<ClientStore>
  package let lifetimes: SessionLifetimes
  package let hasher: PasswordHasher
  /// A hash with the current parameters of a password nobody knows: an unknown email is verified
  /// against it, so that it costs the same Argon2id work as a known one. Made once per process.
  package let decoyHash: String
  /// Epoch seconds (injectable for tests).
  package let clock: @Sendable () -> Int
  /// Session answers the loops may send without the pool while the database is unchanged.
  package let sessionCache: SessionCache<PrebuiltResponse>
  /// Live sessions with their accounts and memberships, read by the store for a token: what the
  /// loops check a forwarded call against without the pool, under the same rules.
  package let viewCache: SessionCache<SessionView>
  /// Views the loops answered past their refresh time, read again off the loops.
  package let refresher: SessionRefresher
  /// On PostgreSQL with a session cache: the connection that hears of other instances' changes.
  public let listener: ChangeListener?
  /// On PostgreSQL: this instance's heartbeat, which sizes the rate limiters' share.
  public let heartbeat: FleetHeartbeat?
  /// With an SMTP relay: the outbox's sender.
  public let mailer: MailDelivery?
  /// Attempts per client address at `POST /sign-in` and `POST /native/sign-in` together.
  package let signInLimiter: RateLimiter
  /// Attempts per client address at the native exchange.
  package let exchangeLimiter: RateLimiter
  /// Peers whose `X-Forwarded-For` is believed.
  package let trustedProxies: Set<String>
  /// How long a rate-limit refusal is held before it is sent (a tarpit; zero sends it at once).
  package let refusalHold: Duration
  /// How many invitations may go out per hour, per inviter, school and address (fleet-wide: counted
  /// in the store).
  package let invitationLimits: InvitationLimits

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
    let epochs: ChangeEpoch
    let capacity: Int
    switch database {
    case .sqlite(let file):
      epochs = ChangeEpoch(databasePath: file)
      capacity = sessionCacheEntries
    case .postgres:
      epochs = ChangeEpoch { listener }
      capacity = listener == nil ? 0 : sessionCacheEntries
    }
    stores = ThreadLocal {
      try gate.attempt { () throws(StoreError) in
        let opened = try database.open(settings, schedule: gate)
        // This process's own changes reach its cache at commit, before their notification returns;
        // the writer then waits for every other instance's listener to have heard them.
        if let postgres = opened as? PostgresDatabase {
          postgres.afterAnnouncedCommit = { database in
            if let listener {
              listener.changeCommitted(on: database)
            } else {
              ChangeListener.awaitOthers(database, except: nil)
            }
          }
        }
        let store = try ClientStore(database: opened, clock: clock)
        // On SQLite every commit moves the caches' stamp: last-seen writes say they change no answer.
        if case .sqlite = database { store.seenWrites = epochs }
        return store
      }
    }
    self.lifetimes = lifetimes
    self.hasher = hasher
    decoyHash = hasher.decoy()
    self.clock = clock
    sessionCache = SessionCache(capacity: capacity, epochs: epochs)
    viewCache = SessionCache(capacity: capacity, epochs: epochs)
    refresher = SessionRefresher()
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

  /// This worker thread's store connection (opened on first use).
  package func store() throws(StoreError) -> ClientStore {
    do { return try stores.value() } catch let error as StoreError { throw error } catch {
      throw StoreError.failed("\(error)")
    }
  }

  /// How long the loops may answer a view read for `session` (`viewCache`): until its end, its idle
  /// end or two last-seen resolutions past its last-seen time, whichever comes first; from one
  /// resolution on, the first answer has it read again (`refreshViews`), which writes its last-seen
  /// time and keeps it answerable.
  package func viewTimes(_ session: SessionRecord) -> (validUntil: Int, refreshAt: Int) {
    let idle = lifetimes.idle(session.kind)
    let resolution = ClientStore.seenResolution
    return (
      min(session.expiresAt, session.lastSeenAt + min(idle, 2 * resolution)),
      min(session.expiresAt, session.lastSeenAt + min(idle, resolution))
    )
  }

  /// Reads the views `batch` names again (on the refresher's thread), in one statement, and keeps
  /// each for the loops; a session that ended is forgotten, so its next request goes to the store.
  package func refreshViews(_ batch: [SessionRefresher.Due]) {
    do {
      let epoch = viewCache.epochBeforeRead()
      let store = try store()
      let views = try store.sessionViews(
        tokens: batch.map(\.token), lifetimes: lifetimes,
        networks: batch.map { store.networkHint(address: $0.address) })
      for (due, view) in zip(batch, views) {
        let digest = Secrets.digest(due.token)
        guard let view else {
          viewCache.forget(digest)
          continue
        }
        // No epoch (the database's state unknown just now): the entry stays as it is, to its end.
        guard let epoch else { continue }
        let times = viewTimes(view.session)
        viewCache.store(
          view, for: digest, epoch: epoch, validUntil: times.validUntil, refreshAt: times.refreshAt)
      }
    } catch {
      // The entries end at their `validUntil`: the loops then send their requests to the pool.
      Log.event(
        "warning", "session_refresh_failed", [("sessions", String(batch.count)), ("error", "\(error)")])
    }
  }

  /// The network hint of `request`'s client address (`ClientStore.networkHint`).
  package func network(_ request: Request, _ store: ClientStore) -> String? {
    store.networkHint(address: ClientAddress.of(request, trustedProxies: trustedProxies))
  }
}
