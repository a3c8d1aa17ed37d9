import Store

/// One message as the outbox keeps it. Bodies are nil once it has been delivered.
public struct OutboxEntry: Sendable, Equatable {
  public let id: Int
  /// The stable `Message-ID` (`<...@host>`): the same at every attempt, so a receiver can tell a
  /// repeat delivery from a new message.
  public let messageID: String
  /// What the message is for (`recovery`, `password_changed`, `invitation`, ...).
  public let kind: String
  public let to: String
  public let subject: String
  public let text: String?
  public let html: String?
  public let createdAt: Int
  public let attempts: Int
  public let nextAttemptAt: Int
  public let sentAt: Int?
  /// The last delivery failure (the SMTP server's answer, never a body).
  public let lastError: String?
}

/// A message to write to the outbox: plain text plus simple HTML, no tracking, no third-party links.
public struct MailMessage: Sendable, Equatable {
  public var kind: String
  public var to: EmailAddress
  public var subject: String
  public var text: String
  public var html: String

  /// A message of `kind` to `to`.
  public init(kind: String, to: EmailAddress, subject: String, text: String, html: String) {
    (self.kind, self.to, self.subject, self.text, self.html) = (kind, to, subject, text, html)
  }
}

extension ClientStore {
  /// How long one sender may hold a claimed message before another instance may try it (a sender
  /// that died mid-delivery is covered by the next: at least once, with the same `Message-ID`).
  public static let mailClaim = 120
  /// Delivery attempts before a message is given up (about eight hours at the default back-off).
  public static let mailAttempts = 12

  /// Writes `message` to the outbox, inside the caller's transaction: it is sent if and only if
  /// the action that caused it commits. `host` names the `Message-ID`'s right-hand side.
  @discardableResult
  public func enqueueMail(_ message: MailMessage, host: String) throws(StoreError) -> String {
    let messageID = "<\(Secrets.identifier("msg"))@\(host)>"
    let now = clock()
    try db.query(
      """
      INSERT INTO outbox (message_id, kind, to_address, subject, text_body, html_body, created_at, next_attempt_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?)
      """,
      [
        .text(messageID), .text(message.kind), .text(message.to.normalised), .text(message.subject),
        .text(message.text), .text(message.html), .integer(Int64(now)), .integer(Int64(now)),
      ])
    return messageID
  }

  /// Claims up to `limit` messages due now for this sender, fleet-wide one at a time (so each is
  /// delivered by one instance), and returns them.
  public func claimDueMail(limit: Int = 10, claim: Int = ClientStore.mailClaim) throws(StoreError)
    -> [OutboxEntry]
  {
    try db.exclusiveTransaction(.mail) { () throws(StoreError) -> [OutboxEntry] in
      let now = clock()
      let due = try db.query(
        """
        SELECT \(Self.outboxColumns) FROM outbox
        WHERE sent_at IS NULL AND text_body IS NOT NULL AND next_attempt_at <= ? AND claimed_until <= ?
        ORDER BY id LIMIT ?
        """, [.integer(Int64(now)), .integer(Int64(now)), .integer(Int64(limit))]
      ).map(Self.outboxEntry)
      for entry in due {
        try db.query(
          "UPDATE outbox SET claimed_until = ? WHERE id = ?",
          [.integer(Int64(now + claim)), .integer(Int64(entry.id))])
      }
      return due
    }
  }

  /// The message was accepted by the SMTP server: it is kept as metadata, its bodies (a link with
  /// a token) erased.
  public func markDelivered(_ id: Int) throws(StoreError) {
    try db.query(
      """
      UPDATE outbox SET sent_at = ?, text_body = NULL, html_body = NULL, attempts = attempts + 1,
        claimed_until = 0, last_error = NULL WHERE id = ?
      """, [.integer(Int64(clock())), .integer(Int64(id))])
  }

  /// Delivery failed: try again after a back-off (`firstWait` seconds doubling, at most an hour),
  /// keeping `error`.
  public func markFailed(_ id: Int, error: String, firstWait: Double = 30) throws(StoreError) {
    try db.transaction { () throws(StoreError) in
      guard
        case .integer(let attempts)? = try db.query(
          "SELECT attempts FROM outbox WHERE id = ?", [.integer(Int64(id))]
        )
        .first?.first
      else { return }
      guard attempts + 1 < Self.mailAttempts else {
        // Given up: the body (a link with a token) goes; the metadata says why.
        try db.query(
          """
          UPDATE outbox SET attempts = attempts + 1, claimed_until = 0, text_body = NULL, html_body = NULL,
            last_error = ? WHERE id = ?
          """,
          [
            .text("gave up after \(Self.mailAttempts) attempts: " + String(error.prefix(250))),
            .integer(Int64(id)),
          ])
        return
      }
      let wait = min(firstWait * Double(1 << min(Int(attempts), 7)), 3600)
      try db.query(
        """
        UPDATE outbox SET attempts = attempts + 1, next_attempt_at = ?, claimed_until = 0, last_error = ?
        WHERE id = ?
        """,
        [
          .integer(Int64(clock() + Int(wait.rounded(.up)))), .text(String(error.prefix(300))),
          .integer(Int64(id)),
        ])
    }
  }

  /// Messages not yet sent (delivery pending or being retried), fleet-wide.
  public func pendingMail() throws(StoreError) -> Int {
    guard
      case .integer(let n)? = try db.query(
        "SELECT count(*) FROM outbox WHERE sent_at IS NULL AND text_body IS NOT NULL", []
      ).first?.first
    else { return 0 }
    return Int(n)
  }

  /// The newest `limit` messages, newest first (for `admin outbox list`).
  public func outbox(limit: Int = 50) throws(StoreError) -> [OutboxEntry] {
    try db.query(
      "SELECT \(Self.outboxColumns) FROM outbox ORDER BY id DESC LIMIT ?", [.integer(Int64(limit))]
    )
    .map(Self.outboxEntry)
  }

  /// One message by its number.
  public func outboxEntry(id: Int) throws(StoreError) -> OutboxEntry? {
    try db.query("SELECT \(Self.outboxColumns) FROM outbox WHERE id = ?", [.integer(Int64(id))])
      .first.map(Self.outboxEntry)
  }

  /// Erases the bodies of messages older than `window` seconds that were never delivered (their
  /// links have expired long since); returns how many.
  @discardableResult
  public func eraseStaleMail(window: Int) throws(StoreError) -> Int {
    try db.query(
      """
      UPDATE outbox SET text_body = NULL, html_body = NULL, last_error = 'not delivered within a week: given up'
      WHERE sent_at IS NULL AND created_at < ? AND text_body IS NOT NULL
      """, [.integer(Int64(clock() - window))])
    return db.changes
  }

  static let outboxColumns =
    "id, message_id, kind, to_address, subject, text_body, html_body, created_at, attempts, next_attempt_at, sent_at, last_error"

  package static func outboxEntry(_ row: [DatabaseValue]) -> OutboxEntry {
    OutboxEntry(
      id: row[0].int ?? 0, messageID: row[1].text ?? "", kind: row[2].text ?? "", to: row[3].text ?? "",
      subject: row[4].text ?? "", text: row[5].text, html: row[6].text, createdAt: row[7].int ?? 0,
      attempts: row[8].int ?? 0, nextAttemptAt: row[9].int ?? 0, sentAt: row[10].int,
      lastError: row[11].text)
  }
}
