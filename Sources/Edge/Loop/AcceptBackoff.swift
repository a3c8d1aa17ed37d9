/// What a loop does when `accept` fails for want of descriptors or memory (EMFILE, ENFILE,
/// ENOBUFS, ENOMEM) or for any reason but a vanished connection: stop watching its listeners for
/// `pause` (the kernel's backlog keeps the waiting clients, as with nginx's pause), and write at
/// most one log line per `logInterval`, counting the failures it stands for. Without it every loop
/// would spin on a listener that stays readable and log each failure.
struct AcceptBackoff {
  /// How long the listeners are not watched after a failure.
  static let pause: Duration = .milliseconds(100)
  /// The least time between two log lines.
  static let logInterval: Duration = .seconds(1)

  /// When the listeners are watched again (`never`: they are watched now).
  private(set) var resumeAt = Instant.never
  private var unlogged = 0
  private var nextLog = Instant(nanoseconds: 0)

  /// Whether accepting is paused.
  var paused: Bool { resumeAt != .never }

  /// `accept` failed at `now`: pause, and return the number of failures to log now (nil: not yet).
  mutating func failed(at now: Instant) -> Int? {
    unlogged += 1
    resumeAt = now.adding(Self.pause)
    guard now >= nextLog else { return nil }
    nextLog = now.adding(Self.logInterval)
    defer { unlogged = 0 }
    return unlogged
  }

  /// The listeners are watched again.
  mutating func resumed() { resumeAt = .never }
}
