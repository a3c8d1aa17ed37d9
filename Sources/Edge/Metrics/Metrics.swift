import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The route names the `route` label takes: each route's name gets an index when the route is
/// made, once per process (a reload's routes find the names already there). Index 0 is `none`
/// (no route matched); past `capacity` names every new one is `other`, so a route table that grew
/// without bound could not grow the series with it.
public enum RouteNames {
  /// The most names, `none` and `other` included.
  public static let capacity = 128
  public static let none = "none"
  public static let other = "other"
  private static let table = Mutex<(names: [String], indices: [String: Int])>(([none], [none: 0]))

  /// The index of `name`, given it now if it has none.
  public static func index(_ name: String) -> RouteIndex {
    table.withLock { table in
      if let i = table.indices[name] { return i }
      guard table.names.count < capacity - 1 else { return capacity - 1 }
      table.names.append(name)
      table.indices[name] = table.names.count - 1
      return table.names.count - 1
    }
  }

  /// Every name, by index.
  public static var names: [String] { table.withLock { $0.names } }
}

/// One thread's counters: a fixed block of cells, one per series (a histogram's series take its
/// buckets, `+Inf` and the sum), laid out by `MetricCatalog`.
///
/// Only the thread that owns a shard writes it, so an increment is a relaxed load and store, never
/// a locked instruction; a scrape on another thread reads every cell with relaxed loads and sums
/// the shards.
// Safe to share unchecked: the only state is `cells`, a buffer allocated zeroed in init,
// freed in deinit (when no reference, hence no reader or writer, remains), and otherwise accessed
// only through `Atomic` operations, which are data-race free whatever the threads.
public final class MetricShard: @unchecked Sendable {
  private let cells: UnsafeMutablePointer<Atomic<UInt64>>

  init(count: Int = MetricCatalog.shardCells) {
    // Zeroed by calloc, which for a block this size maps fresh pages: the cells of series never
    // counted (most of the requests family's) take no memory, where initialising each would have
    // made the whole ~700 KiB resident in every thread that counts. An `Atomic<UInt64>` is its
    // 8-byte value and nothing else, so zero bytes are an `Atomic(0)`.
    guard let raw = calloc(count, MemoryLayout<Atomic<UInt64>>.stride) else {
      fatalError("cannot allocate \(count) metric cells")
    }
    cells = raw.bindMemory(to: Atomic<UInt64>.self, capacity: count)
  }

  deinit { free(cells) }

  /// Adds `n` to cell `cell` (the owning thread only).
  @inline(__always)
  func add(_ cell: Int, _ n: UInt64 = 1) {
    cells[cell].store(cells[cell].load(ordering: .relaxed) &+ n, ordering: .relaxed)
  }

  /// The value of cell `cell`.
  func load(_ cell: Int) -> UInt64 { cells[cell].load(ordering: .relaxed) }

  /// Counts `n` in series `series` of `id`.
  @inline(__always)
  public func count(_ id: MetricID, _ series: Int = 0, by n: UInt64 = 1) {
    add(Self.offsets[id.rawValue] + series, n)
  }

  /// Records `value` (in the family's integer unit: nanoseconds, bytes) in histogram `id`'s series.
  public func observe(_ id: MetricID, _ series: Int, _ value: UInt64) {
    observe(Self.handles[id.rawValue], series, value)
  }

  /// Counts `n` in series `series` of the registered family `family`.
  @inline(__always)
  public func count(_ family: MetricHandle, _ series: Int = 0, by n: UInt64 = 1) {
    add(family.offset + series, n)
  }

  /// Records `value` (in the family's integer unit: nanoseconds, bytes) in the series `series` of
  /// the registered histogram `family`.
  public func observe(_ family: MetricHandle, _ series: Int, _ value: UInt64) {
    observe(family.offset + series * family.width, family.bounds, value)
  }

  // What the per-request path needs, read once: plain integers, so that counting a request copies
  // no family (whose strings and arrays would each be retained and released).
  private static let handles = MetricCatalog.engine.map(MetricHandle.init)
  private static let offsets = MetricCatalog.engine.map(\.offset)
  private static let requestsBase = offsets[MetricID.requests.rawValue]
  private static let durationBase = offsets[MetricID.requestDuration.rawValue]
  private static let sizeBase = offsets[MetricID.responseSize.rawValue]
  private static let durationBounds = MetricFamily.durationBuckets.map { UInt64(($0 * 1e9).rounded()) }
  private static let sizeBounds = MetricFamily.sizeBuckets.map { UInt64($0) }

  /// Counts `value` in a histogram of `bounds` whose series starts at cell `base`.
  @inline(__always)
  private func observe(_ base: Int, _ bounds: [UInt64], _ value: UInt64) {
    var bucket = 0
    while bucket < bounds.count && value > bounds[bucket] { bucket += 1 }
    add(base + bucket)
    add(base + bounds.count + 1, value)
  }

  /// An answered request: counted by route, method, protocol and status, and its duration and
  /// size by cache class. Never inlined: one call per request, so that a profile can say what
  /// counting costs (`build/bench fixed|shell` reads it from perf).
  @inline(never)
  func served(
    route: RouteIndex, method: HTTPMethod?, protocol: MetricProtocol, status: Int, cacheClass: CacheClass,
    bytes: Int, durationNanoseconds: UInt64
  ) {
    add(
      Self.requestsBase
        + MetricFamily.requestSeries(route: route, method: method, protocol: `protocol`, status: status))
    // Errors are private whatever the route (`CacheClass.applied`).
    let cls = status >= 400 ? 3 : MetricFamily.classIndex(cacheClass)
    let durations = Self.durationBounds
    observe(Self.durationBase + cls * (durations.count + 2), durations, durationNanoseconds)
    let sizes = Self.sizeBounds
    observe(Self.sizeBase + cls * (sizes.count + 2), sizes, UInt64(max(0, bytes)))
  }
}

/// A value an operator reads that is not a count: a queue's depth, a certificate's expiry, the
/// build that runs. Read at scrape time.
public struct GaugeFamily: Sendable {
  public let name: String
  public let help: String
  /// Its series now: label pairs and value.
  public let read: @Sendable () -> [(labels: [(String, String)], value: Double)]

  public init(
    _ name: String, _ help: String,
    read: @escaping @Sendable () -> [(labels: [(String, String)], value: Double)]
  ) {
    self.name = name
    self.help = help
    self.read = read
  }
}

/// The process's metrics: every thread's shard, the gauges read at scrape time, and the
/// Prometheus text exposition (format 0.0.4) of their sum. Built once per process.
public final class Metrics: Sendable {
  /// The process's own (its namespace is the composition's to set, at start).
  public static let process = Metrics()

  private final class Shards: Sendable {
    let list = Mutex<[MetricShard]>([])
  }

  private let shards: Shards
  private let gauges = Mutex<[GaugeFamily]>([])
  private let local: ThreadLocal<MetricShard>
  private let on = Atomic<Bool>(true)
  private let prefix: Mutex<String>

  /// An empty registry whose engine metrics are named under `namespace`.
  public init(namespace: String = "edge") {
    prefix = Mutex(namespace)
    let shards = Shards()
    self.shards = shards
    local = ThreadLocal {
      let shard = MetricShard()
      shards.list.withLock { $0.append(shard) }
      return shard
    }
  }

  /// What the engine's metric names begin with (`namespace_http_requests_total`); the names of
  /// registered families and of gauges are shown as they were given.
  public var namespace: String {
    get { prefix.withLock { $0 } }
    set { prefix.withLock { $0 = newValue } }
  }

  /// Whether counting is on (`--no-metrics` turns it off; for measuring what it costs).
  public var enabled: Bool {
    get { on.load(ordering: .relaxed) }
    set { on.store(newValue, ordering: .relaxed) }
  }

  /// This thread's shard (made on its first use), or nil when counting is off.
  public func shard() -> MetricShard? {
    guard enabled else { return nil }
    return try? local.value()
  }

  /// Counts `n` in series `series` of `id`, in this thread's shard.
  public static func count(_ id: MetricID, _ series: Int = 0, by n: UInt64 = 1) {
    process.shard()?.count(id, series, by: n)
  }

  /// Records `value` in histogram `id`'s series, in this thread's shard.
  public static func observe(_ id: MetricID, _ series: Int, _ value: UInt64) {
    process.shard()?.observe(id, series, value)
  }

  /// Counts `n` in series `series` of the registered family `family`, in this thread's shard.
  public static func count(_ family: MetricHandle, _ series: Int = 0, by n: UInt64 = 1) {
    process.shard()?.count(family, series, by: n)
  }

  /// Records `value` in the registered histogram `family`'s series, in this thread's shard.
  public static func observe(_ family: MetricHandle, _ series: Int, _ value: UInt64) {
    process.shard()?.observe(family, series, value)
  }

  /// Gauges read at every scrape, in place of any of the same name.
  public func set(_ gauge: GaugeFamily) {
    gauges.withLock { list in
      if let i = list.firstIndex(where: { $0.name == gauge.name }) {
        list[i] = gauge
      } else {
        list.append(gauge)
      }
    }
  }

  /// Every cell summed over the shards.
  public func totals() -> [UInt64] {
    var sum = [UInt64](repeating: 0, count: MetricCatalog.cells)
    for shard in shards.list.withLock({ $0 }) {
      for i in 0..<sum.count { sum[i] &+= shard.load(i) }
    }
    return sum
  }

  /// The sum of every series of `id` (a test's and a gauge's view).
  public func total(_ id: MetricID, series: Int? = nil) -> UInt64 {
    total(MetricHandle(MetricCatalog.engine[id.rawValue]), series: series)
  }

  /// The sum of every series of the registered family `family`, or of one.
  public func total(_ family: MetricHandle, series: Int? = nil) -> UInt64 {
    let sum = totals()
    if let series { return sum[family.offset + series * family.width] }
    return (0..<family.series).reduce(0) { $0 &+ sum[family.offset + $1 * family.width] }
  }

  /// The Prometheus text exposition of everything now.
  public func exposition() -> String {
    let families = MetricCatalog.families
    let sum = enabled ? totals() : []
    let routes = RouteNames.names
    let namespace = namespace
    var out = ""
    out.reserveCapacity(16384)
    func derived(_ id: MetricID, _ series: Int = 0) -> UInt64 {
      sum[MetricCatalog.engine[id.rawValue].offset + series]
    }
    if enabled {
      for family in families {
        guard let name = family.exposedName(namespace: namespace) else { continue }
        Self.write(family, name: name, sum: sum, routes: routes, to: &out)
      }
      // Gauges derived from counters of this loop and that: in flight, connections open.
      let inFlight = Double(derived(.requestsDispatched)) - Double(derived(.requestsCompleted))
      let inFlightName = namespace + "_http_requests_in_flight"
      Self.header(inFlightName, "Requests handed to a pool and not yet answered.", .gauge, &out)
      out += "\(inFlightName) \(Self.number(max(0, inFlight)))\n"
      let openName = namespace + "_connections_open"
      Self.header(openName, "Open connections, by protocol (pending: not yet chosen).", .gauge, &out)
      var chosenTotal = 0.0
      for (i, p) in ["http1", "h2"].enumerated() {
        let chosen = Double(derived(.connectionsChosen, i))
        chosenTotal += chosen
        let open = chosen - Double(derived(.connectionsClosedBy, i + 1))
        out += "\(openName){protocol=\"\(p)\"} \(Self.number(max(0, open)))\n"
      }
      let accepted = (0..<2).reduce(0.0) { $0 + Double(derived(.connectionsAccepted, $1)) }
      let pending = accepted - chosenTotal - Double(derived(.connectionsClosedBy, 0))
      out += "\(openName){protocol=\"pending\"} \(Self.number(max(0, pending)))\n"
    }
    for gauge in gauges.withLock({ $0 }) {
      Self.header(gauge.name, gauge.help, .gauge, &out)
      for sample in gauge.read() {
        out += gauge.name
        Self.labels(sample.labels, &out)
        out += " \(Self.number(sample.value))\n"
      }
    }
    return out
  }

  private static func write(
    _ family: MetricFamily, name: String, sum: [UInt64], routes: [String], to out: inout String
  ) {
    header(name, family.help, family.kind, &out)
    for series in 0..<family.series {
      let base = family.offset + series * family.width
      guard family.kind == .histogram else {
        let value = sum[base]
        guard value > 0 || family.showZeros else { continue }
        let labels = family.labelValues(series, routes: routes)
        out += name
        Self.labels(labels, &out)
        out += " \(value)\n"
        continue
      }
      let labels = family.labelValues(series, routes: routes)
      var cumulative: UInt64 = 0
      for (i, bound) in family.buckets.enumerated() {
        cumulative &+= sum[base + i]
        out += name + "_bucket"
        Self.labels(labels + [("le", number(bound))], &out)
        out += " \(cumulative)\n"
      }
      cumulative &+= sum[base + family.buckets.count]
      out += name + "_bucket"
      Self.labels(labels + [("le", "+Inf")], &out)
      out += " \(cumulative)\n"
      out += name + "_sum"
      Self.labels(labels, &out)
      out += " \(number(Double(sum[base + family.buckets.count + 1]) / family.scale))\n"
      out += name + "_count"
      Self.labels(labels, &out)
      out += " \(cumulative)\n"
    }
  }

  private static func header(_ name: String, _ help: String, _ kind: MetricKind, _ out: inout String) {
    out += "# HELP \(name) \(help)\n# TYPE \(name) \(kind.rawValue)\n"
  }

  private static func labels(_ labels: [(String, String)], _ out: inout String) {
    guard !labels.isEmpty else { return }
    out += "{"
    for (i, (name, value)) in labels.enumerated() {
      if i > 0 { out += "," }
      out += name + "=\""
      // Exposition 0.0.4: backslash, double quote and line feed are escaped in label values.
      for c in value {
        switch c {
        case "\\": out += "\\\\"
        case "\"": out += "\\\""
        case "\n": out += "\\n"
        default: out.append(c)
        }
      }
      out += "\""
    }
    out += "}"
  }

  /// A sample value as the exposition writes it (integers without a fraction).
  static func number(_ value: Double) -> String {
    if value.isNaN { return "NaN" }
    if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
    if value == value.rounded() && abs(value) < 1e15 { return String(Int64(value)) }
    return "\(value)"
  }
}
