import CLinux
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// How a server listens, how many loops and workers it runs, and its limits.
public struct ServerConfiguration: Sendable {
  /// Addresses to listen on; every loop gets its own `SO_REUSEPORT` socket for each.
  public var listen: [SocketAddress] = [.v4(host: "127.0.0.1", port: 8080)]
  /// Event loops (threads); default one per core.
  public var threads: Int = ServerConfiguration.cores
  /// Worker threads for pooled routes.
  public var poolThreads: Int = max(2, ServerConfiguration.cores)
  /// Pooled requests that may wait for a worker before new ones get 503.
  public var poolQueue: Int = 256
  /// Low-priority worker threads for background routes (password hashing).
  public var backgroundThreads: Int = max(1, ServerConfiguration.cores / 2)
  /// Background requests that may wait before new ones get 503.
  public var backgroundQueue: Int = 64
  /// Connection and request limits.
  public var limits = Limits()
  /// After SIGTERM/SIGINT, how long in-flight requests may take before the process exits anyway.
  public var drainTimeout: Duration = .seconds(10)
  /// Whether to write the access log to standard output.
  public var accessLog = true
  /// Addresses that speak TLS (with `tls`); every loop gets its own socket for each, as for `listen`.
  public var tlsListen: [SocketAddress] = []
  /// The TLS configuration for `tlsListen`.
  public var tls: TLSContext? = nil
  /// When set, plain-HTTP listeners answer every request but those for `clearPaths` with `308` to
  /// this origin.
  public var httpsRedirect: String? = nil
  /// Paths plain-HTTP listeners answer even with `httpsRedirect` set: health checks, for load
  /// balancers.
  public var clearPaths: Set<String> = []
  /// How often the TLS session-ticket keys are replaced (a new context from the same files).
  public var ticketKeyRotation: Duration = .seconds(12 * 3600)
  /// Whether plain listeners take HTTP/2 with prior knowledge (h2c: a connection that opens with
  /// the HTTP/2 preface), for tests and a TLS-terminating proxy in front; never `Upgrade: h2c`.
  public var http2Cleartext = false
  /// Where the admin listener (`adminRouter`'s routes) listens; empty: nowhere. It has
  /// a loop of its own, takes no TLS and no HTTP/2, and its requests are neither logged nor counted.
  public var adminListen: [SocketAddress] = []
  /// The client networks the admin listener serves; empty: loopback only.
  public var adminAllow: [IPNetwork] = []
  /// Where the loops count (nil: metrics off).
  public var metrics: Metrics? = nil
  /// The upstreams forwarded calls go to (each loop keeps its own pool of each); a `Snapshot`
  /// replaces them.
  public var upstreams: [UpstreamEndpoint] = []
  /// The upstream client's metric families (nil: not counted).
  public var upstreamMetrics: UpstreamMetrics? = nil

  /// The defaults.
  public init() {}

  /// Online processors.
  public static var cores: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }
}

/// What a reload replaces, atomically on each loop: the route table and the TLS context. Existing
/// TLS connections keep the context they were accepted with; new handshakes use the new one.
public struct Snapshot: Sendable {
  public var router: Router
  public var tls: TLSContext?
  /// As `ServerConfiguration.httpsRedirect` (the origin may change on reload).
  public var httpsRedirect: String?
  /// As `ServerConfiguration.upstreams`: a pool whose endpoint is unchanged keeps its connections.
  public var upstreams: [UpstreamEndpoint]

  public init(
    router: Router, tls: TLSContext? = nil, httpsRedirect: String? = nil, upstreams: [UpstreamEndpoint] = []
  ) {
    self.router = router
    self.tls = tls
    self.httpsRedirect = httpsRedirect
    self.upstreams = upstreams
  }
}

/// The engine: loops, listeners, pool and lifecycle. `run` blocks until the server has stopped.
public final class Server: Sendable {
  private let configuration: ServerConfiguration
  private let router: Router
  private let adminRouter: Router?

  /// A server for `router`, and `adminRouter` on the admin listener (`adminListen`).
  public init(configuration: ServerConfiguration, router: Router, adminRouter: Router? = nil) {
    self.configuration = configuration
    self.router = router
    self.adminRouter = adminRouter
  }

  /// Blocks signals, binds, starts the loops and the pool, then serves until SIGTERM or SIGINT has
  /// drained the server. SIGHUP calls `reload`; a snapshot it returns replaces the current one on every
  /// loop, and nil keeps the old one (the hook logs why). Returns the process exit status.
  public func run(
    onListening: ([SocketAddress]) -> Void = { _ in }, reload: @escaping @Sendable () -> Snapshot?
  )
    throws(SystemError) -> Int32
  {
    var signals = sigset_t()
    sigemptyset(&signals)
    for s in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&signals, s) }
    // Every thread started below inherits this mask; only this thread takes the signals.
    pthread_sigmask(SIG_BLOCK, &signals, nil)
    signal(SIGPIPE, SIG_IGN)
    let threads = max(1, configuration.threads)
    let fileLimit = Self.raiseFileLimit()
    let wanted = threads * configuration.limits.maxConnectionsPerLoop
    if let fileLimit, wanted > fileLimit {
      Log.event(
        "warning", "file_limit_low",
        [
          ("limit", "\(fileLimit)"), ("threads_times_max_connections", "\(wanted)"),
          (
            "advice",
            "raise the hard descriptor limit (LimitNOFILE, ulimit -Hn) or lower --threads or --max-connections"
          ),
        ])
    }

    var perLoop: [[Int32]] = Array(repeating: [], count: threads)
    var bound: [SocketAddress] = []
    var perLoopTLS: [Set<Int32>] = Array(repeating: [], count: threads)
    let tlsAddresses = configuration.tls == nil ? [] : configuration.tlsListen
    for (address, secure) in configuration.listen.map({ ($0, false) }) + tlsAddresses.map({ ($0, true) }) {
      let actual = try Listener.claim(address)
      bound.append(actual)
      for k in 0..<threads {
        let fd = try Listener.open(actual)
        perLoop[k].append(fd)
        if secure { perLoopTLS[k].insert(fd) }
      }
    }

    var adminListeners: [Int32] = []
    var adminBound: [SocketAddress] = []
    if adminRouter != nil {
      for address in configuration.adminListen {
        let actual = try Listener.claim(address)
        adminBound.append(actual)
        adminListeners.append(try Listener.open(actual))
      }
    }

    let pool = WorkerPool(
      threads: max(1, configuration.poolThreads), capacity: max(0, configuration.poolQueue))
    let background = WorkerPool(
      threads: max(1, configuration.backgroundThreads), capacity: max(0, configuration.backgroundQueue),
      lowPriority: true)
    if let metrics = configuration.metrics {
      metrics.set(
        GaugeFamily(metrics.namespace + "_pool_queue_depth", "Requests waiting for a worker, by pool.") {
          [
            (labels: [("pool", "requests")], value: Double(pool.waiting)),
            (labels: [("pool", "background")], value: Double(background.waiting)),
          ]
        })
    }
    let budget = RequestBudget(limit: configuration.limits.maxBufferedRequestBytes)
    var mailboxes: [LoopMailbox] = []
    let running = LoopCounter()
    for k in 0..<threads {
      let mailbox = try LoopMailbox()
      mailboxes.append(mailbox)
      let listeners = perLoop[k]
      let secureListeners = perLoopTLS[k]
      let tls = configuration.tls
      let limits = configuration.limits
      let http2Cleartext = configuration.http2Cleartext
      let upstreams = configuration.upstreams
      let upstreamMetrics = configuration.upstreamMetrics
      var loopContext = ConnectionContext(router: router, log: AccessLog(enabled: configuration.accessLog))
      loopContext.httpsRedirect = configuration.httpsRedirect
      loopContext.clearPaths = configuration.clearPaths
      let context = loopContext
      let metrics = configuration.metrics
      running.count.add(1, ordering: .relaxed)
      startThread {
        defer { running.count.subtract(1, ordering: .releasing) }
        do {
          // The loop's shard is its thread's own: made here, on that thread.
          var context = context
          context.metrics = metrics?.shard()
          let loop = try EventLoop(
            listeners: listeners, tlsListeners: secureListeners, tls: tls, mailbox: mailbox, pool: pool,
            background: background, limits: limits, budget: budget, context: context,
            http2Cleartext: http2Cleartext, upstreams: upstreams, upstreamMetrics: upstreamMetrics)
          loop.run()
        } catch {
          Log.event("error", "loop_failed", [("error", "\(error)")])
        }
      }
    }
    if let adminRouter, !adminListeners.isEmpty {
      let mailbox = try LoopMailbox()
      mailboxes.append(mailbox)  // drained with the others; never given a snapshot
      let limits = configuration.limits
      // The networks named, or else loopback alone.
      let allowed = configuration.adminAllow.isEmpty ? IPNetwork.loopback : configuration.adminAllow
      let listeners = adminListeners
      running.count.add(1, ordering: .relaxed)
      startThread {
        defer { running.count.subtract(1, ordering: .releasing) }
        do {
          let loop = try EventLoop(
            listeners: listeners, mailbox: mailbox, pool: pool, background: background, limits: limits,
            budget: budget, context: ConnectionContext(router: adminRouter, log: AccessLog(enabled: false)),
            allowed: allowed)
          loop.run()
        } catch {
          Log.event("error", "loop_failed", [("error", "\(error)")])
        }
      }
    }
    let publicMailboxes = mailboxes.count - (adminRouter != nil && !adminListeners.isEmpty ? 1 : 0)
    for address in bound { Log.event("info", "listening", [("address", address.description)]) }
    for address in adminBound { Log.event("info", "admin_listening", [("address", address.description)]) }
    onListening(bound)

    var drainDeadline: Instant? = nil
    let clock = MonotonicClock()
    var currentTLS = configuration.tls
    var nextRotation = clock.now().adding(configuration.ticketKeyRotation)
    while true {
      if drainDeadline != nil && running.count.load(ordering: .acquiring) == 0 {
        Log.event("info", "stopped")
        return 0
      }
      if let deadline = drainDeadline, clock.now() >= deadline {
        Log.event(
          "warning", "drain_timeout", [("loops_still_busy", "\(running.count.load(ordering: .relaxed))")])
        return 0
      }
      var info = siginfo_t()
      var wait = timespec(tv_sec: 0, tv_nsec: drainDeadline == nil ? 500_000_000 : 20_000_000)
      let signal = sigtimedwait(&signals, &info, &wait)
      switch signal {
      case SIGTERM, SIGINT:
        guard drainDeadline == nil else { continue }
        Log.event("info", "draining", [("signal", signal == SIGTERM ? "SIGTERM" : "SIGINT")])
        drainDeadline = clock.now().adding(configuration.drainTimeout)
        for mailbox in mailboxes { mailbox.post(.drain) }
      case SIGHUP:
        if let snapshot = reload() {
          for mailbox in mailboxes.prefix(publicMailboxes) { mailbox.post(.snapshot(snapshot)) }
          if let tls = snapshot.tls { currentTLS = tls }
          Log.event("info", "reloaded")
          configuration.metrics?.shard()?.count(.reloads, 0)
        } else {
          configuration.metrics?.shard()?.count(.reloads, 1)
        }
      default:
        break
      }
      if let tls = currentTLS, drainDeadline == nil, clock.now() >= nextRotation {
        nextRotation = clock.now().adding(configuration.ticketKeyRotation)
        if let fresh = tls.withFreshTicketKeys() {
          currentTLS = fresh
          for mailbox in mailboxes.prefix(publicMailboxes) { mailbox.post(.tls(fresh)) }
          Log.event("info", "tls_ticket_keys_rotated")
        } else {
          Log.event(
            "warning", "tls_ticket_keys_not_rotated",
            [("reason", "the certificate files changed or no longer load; send SIGHUP")])
        }
      }
    }
  }

  /// Lifts the soft open-file limit to the hard one, so that connection limits, not the
  /// default 1024 descriptors, decide how many clients are served. Returns the soft limit now in
  /// force (nil: unknown or unlimited).
  private static func raiseFileLimit() -> Int? {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
    if limit.rlim_cur < limit.rlim_max {
      var raised = limit
      raised.rlim_cur = limit.rlim_max
      if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
    }
    // RLIM_INFINITY is all ones, which Swift cannot import; it is past Int.max.
    return limit.rlim_cur > UInt(Int.max) ? nil : Int(limit.rlim_cur)
  }
}

private final class LoopCounter: Sendable {
  let count = Atomic<Int>(0)
}
