import Synchronization

/// Every metric family the process counts: the engine's own (`MetricID`, `MetricCatalog.engine`),
/// then the families the composition registers for its application (`register`), once per
/// process, at start. One list the exposition and the shards' layout come from.
///
/// Labels are bounded by construction: each dimension has a fixed list of values (the route
/// names grow with the route table, up to `RouteNames.capacity`), and a value outside it is
/// counted as `other` or not at all. No label ever carries a path, an address, an email or an ID.
public enum MetricCatalog {
  /// Cells every shard keeps for registered families, after the engine's: room for far more than
  /// an application counts (a counter takes a cell per series, a histogram its buckets and two
  /// more per series), costing no memory until counted in (a shard's cells are mapped on first use).
  public static let registeredCells = 8192

  /// Cells the engine's families take, at the start of every shard.
  static let engineCells = engine.last.map(\.end) ?? 0

  /// Cells in a shard: the engine's and the room for registered families.
  static let shardCells = engineCells + registeredCells

  private static let registered = Mutex<[MetricFamily]>([])

  /// Registers `family` after those already known and returns where it is counted. The composition
  /// registers its families once per process, at start, before anything is counted or shown; a
  /// family registered later is safe (its cells were zero all along) but shown only from then on.
  /// A name registered twice, or more cells than `registeredCells`, is a programming error.
  public static func register(_ family: MetricFamily) -> MetricHandle {
    registered.withLock { list in
      if let name = family.name {
        precondition(!list.contains { $0.name == name }, "the metric family \(name) is registered twice")
      }
      var family = family
      family.offset = list.last?.end ?? engineCells
      precondition(
        family.end <= shardCells, "registered metric families need more than \(registeredCells) cells")
      list.append(family)
      return MetricHandle(family)
    }
  }

  /// Every family now: the engine's in `MetricID` order, then the registered ones in the order
  /// they were registered.
  public static var families: [MetricFamily] { engine + registered.withLock { $0 } }

  /// Cells the families take now.
  static var cells: Int { registered.withLock { $0.last?.end } ?? engineCells }
}

/// How a family is shown.
public enum MetricKind: String, Sendable {
  case counter, gauge, histogram
}

/// One labelled dimension: the label's name and every value it can take.
public struct MetricLabel: Sendable {
  public let name: String
  public let values: [String]

  public init(_ name: String, _ values: [String]) {
    self.name = name
    self.values = values
  }
}

/// One family: what the exposition says of it, and where its cells are in a shard.
public struct MetricFamily: Sendable {
  /// Its name; nil for the counters only used to derive a gauge (in flight, open connections).
  /// An engine family's is shown after the registry's namespace (`exposedName`).
  public let name: String?
  public let help: String
  public let kind: MetricKind
  /// Whether the first dimension is the route's name (`RouteNames`), before `labels`.
  public let routed: Bool
  public let labels: [MetricLabel]
  /// A histogram's upper bounds, in base units (seconds, bytes).
  public let buckets: [Double]
  /// Observed integers per base unit (nanoseconds per second: 1e9; bytes: 1).
  public let scale: Double
  /// Whether every series is shown, zeros included (small families, so that a rate over a series
  /// that has just begun is right); otherwise only series that have counted something.
  public let showZeros: Bool
  /// The first cell in a shard.
  public internal(set) var offset = 0
  /// Whether `name` is shown after the registry's namespace (the engine's families).
  var namespaced = false

  /// A family for `MetricCatalog.register`: its `name`, `kind` and `help` as the exposition shows
  /// them, its labels with every value they take, and for a histogram its upper `buckets` in base
  /// units and the observed integers per base unit (`scale`). `showZeros`: whether series that
  /// have counted nothing are shown.
  public init(
    name: String, kind: MetricKind, help: String, labels: [MetricLabel] = [], buckets: [Double] = [],
    scale: Double = 1, showZeros: Bool = true
  ) {
    self.init(name, kind, help, labels, buckets: buckets, scale: scale, showZeros: showZeros)
  }

  init(
    _ name: String?, _ kind: MetricKind, _ help: String, routed: Bool = false, _ labels: [MetricLabel] = [],
    buckets: [Double] = [], scale: Double = 1, showZeros: Bool = true
  ) {
    self.name = name
    self.kind = kind
    self.help = help
    self.routed = routed
    self.labels = labels
    self.buckets = buckets
    self.scale = scale
    self.showZeros = showZeros
  }

  /// Series: the product of the dimensions' sizes.
  public var series: Int {
    labels.reduce(routed ? RouteNames.capacity : 1) { $0 * $1.values.count }
  }

  /// Cells per series: one, or a histogram's buckets, `+Inf` and the sum.
  public var width: Int { kind == .histogram ? buckets.count + 2 : 1 }

  /// The cell after its last.
  var end: Int { offset + series * width }

  /// Its name as the exposition of a registry of `namespace` shows it.
  public func exposedName(namespace: String) -> String? {
    guard let name else { return nil }
    return namespaced ? namespace + "_" + name : name
  }

  /// The label values of series `index` (route names from `routes`).
  public func labelValues(_ index: Int, routes: [String]) -> [(String, String)] {
    var rest = index
    var values: [(String, String)] = []
    for label in labels.reversed() {
      values.append((label.name, label.values[rest % label.values.count]))
      rest /= label.values.count
    }
    if routed { values.append(("route", rest < routes.count ? routes[rest] : RouteNames.other)) }
    return values.reversed()
  }
}

/// A registered family as counting needs it: where its cells start in a shard, and a histogram's
/// bounds in the unit it observes. Counting through a handle is an addition, never a lookup.
public struct MetricHandle: Sendable {
  /// The family's first cell in a shard.
  public let offset: Int
  /// Its series.
  public let series: Int
  /// Cells per series.
  public let width: Int
  /// A histogram's upper bounds in observed integers (nanoseconds, bytes); empty for a counter.
  let bounds: [UInt64]

  init(_ family: MetricFamily) {
    offset = family.offset
    series = family.series
    width = family.width
    bounds = family.kind == .histogram ? family.buckets.map { UInt64(($0 * family.scale).rounded()) } : []
  }
}
