import Edge
import Store
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The outbox's sender: a thread of its own, with its own store connection, that every `interval`
/// claims the messages due (fleet-wide one claimer at a time, so each message goes out from one
/// instance), hands each to the SMTP relay, and records the outcome — delivered (bodies erased) or
/// failed (tried again after a back-off). A message survives an SMTP outage and a restart in the
/// store; a sender that dies mid-delivery leaves a claim that runs out, and another sends the
/// message again with the same `Message-ID` (at least once).
public final class MailDelivery: Sendable {
  private final class Shared: Sendable {
    package let stopped = Atomic<Bool>(false)
    package let delivered = Atomic<Int>(0)
  }

  private let shared = Shared()

  /// Starts delivering the outbox of `database` through `smtp`.
  public init(
    database: DatabaseLocation, settings: DatabaseSettings, smtp: SMTPSettings,
    interval: Duration = .seconds(1), firstRetry: Duration = .seconds(30),
    clock: @escaping @Sendable () -> Int
  ) {
    let shared = self.shared
    // One message at a time, each claimed for longer than one delivery may take, so a slow relay
    // never lets another instance's claim overlap this one's. A failure to read the outbox is
    // said once; the outbox keeps the mail meanwhile.
    let claim = Int(smtp.timeout.components.seconds) + 60
    let wait = Double(firstRetry.components.seconds) + Double(firstRetry.components.attoseconds) / 1e18
    StoreLoop.start(
      database: database, settings: settings, clock: clock, interval: interval,
      events: ("mail_outbox_unreadable", "mail_outbox_readable"),
      stopped: { shared.stopped.load(ordering: .sequentiallyConsistent) },
      step: { store in
        while let entry = try store.claimDueMail(limit: 1, claim: claim).first {
          let bytes = MailFormat.message(entry, from: smtp.from, date: clock())
          if let failure = SMTPSender.send(bytes, to: entry.to, settings: smtp) {
            try store.markFailed(entry.id, error: failure, firstWait: wait)
            Metrics.count(.mailDeliveries, 1)
            Log.event(
              "error", "mail_failed",
              [
                ("id", "\(entry.id)"), ("kind", entry.kind), ("attempt", "\(entry.attempts + 1)"),
                ("error", failure),
              ])
          } else {
            try store.markDelivered(entry.id)
            Metrics.count(.mailDeliveries, 0)
            shared.delivered.add(1, ordering: .sequentiallyConsistent)
            Log.event(
              "info", "mail_sent",
              [("id", "\(entry.id)"), ("kind", entry.kind), ("message_id", entry.messageID)])
          }
        }
        MailDelivery.pending.store(try store.pendingMail(), ordering: .relaxed)
      })
  }

  /// The thread ends within an interval of the last reference going.
  deinit { shared.stopped.store(true, ordering: .sequentiallyConsistent) }

  /// Messages in the outbox not yet sent, as the sender last counted them (-1: not yet counted).
  public static let pending = Atomic<Int>(-1)

  /// Messages this process delivered (for tests).
  public var delivered: Int { shared.delivered.load(ordering: .sequentiallyConsistent) }
}
