import CCurl
import Store

#if canImport(Glibc)
  import Glibc
#endif

/// Where and how mail is delivered: the relay's URL, the envelope sender, credentials.
public struct SMTPSettings: Sendable, Equatable {
  /// `smtp://host[:port]` or `smtps://host[:port]`.
  public var url: String
  /// The `From` header as configured (`Name <address>` or an address).
  public var from: String
  public var username: String? = nil
  public var password: String? = nil
  /// The longest a delivery may take, connection included.
  public var timeout: Duration = .seconds(30)
  /// How often the outbox is looked at for messages due.
  public var interval: Duration = .seconds(1)
  /// The first wait after a failed delivery (it doubles at each failure, up to an hour).
  public var firstRetry: Duration = .seconds(30)

  /// Settings for the relay at `url` sending as `from`.
  public init(url: String, from: String) {
    self.url = url
    self.from = from
  }

  /// The bare address of `from` (inside `<...>` when a name is given): the envelope sender.
  public var envelopeFrom: String {
    if let open = from.lastIndex(of: "<"), let close = from.lastIndex(of: ">"), open < close {
      return String(from[from.index(after: open)..<close])
    }
    return from
  }

  /// A relay on the loopback interface may speak plain SMTP; any other must offer STARTTLS
  /// (smtp://) or TLS from the start (smtps://).
  public var requiresTLS: Bool {
    guard url.hasPrefix("smtp://") else { return true }
    var rest = url.dropFirst("smtp://".count)
    if let at = rest.lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
    let host =
      rest.hasPrefix("[")
      ? String(rest.dropFirst().prefix { $0 != "]" }) : String(rest.prefix { $0 != ":" && $0 != "/" })
    var v4 = in_addr()
    let loopbackV4 = inet_pton(AF_INET, host, &v4) == 1 && UInt32(bigEndian: v4.s_addr) >> 24 == 127
    return !(host == "localhost" || host == "::1" || loopbackV4)
  }

  /// As it may be printed: the URL without user information, never the password.
  public var description: String {
    guard let scheme = url.firstRange(of: "://") else { return url }
    let rest = url[scheme.upperBound...]
    guard let at = rest.lastIndex(of: "@") else { return url }
    return String(url[..<scheme.upperBound]) + "***@" + rest[rest.index(after: at)...]
  }
}

/// Delivers one message through libcurl's SMTP client (RFC 5321): `MAIL FROM`, one `RCPT TO`, the
/// message as `DATA`, with STARTTLS required as `SMTPSettings.requiresTLS` says.
public enum SMTPSender {
  /// Nil once libcurl is loaded (this loads it); else why it cannot be.
  public static var libraryFailure: String? { be_curl_load_failure().map { String(cString: $0) } }

  /// Sends `message` to `recipient`; nil when the relay accepted it, else one line saying why
  /// (curl's reason and the relay's answer; never the message).
  public static func send(_ message: [UInt8], to recipient: String, settings: SMTPSettings) -> String? {
    if let failure = be_curl_load_failure() { return String(cString: failure) }
    guard let curl = be_curl_easy_init() else { return "cannot start libcurl" }
    defer { be_curl_easy_cleanup(curl) }
    let source = MessageSource(message)
    var recipients: UnsafeMutablePointer<curl_slist>? = nil
    recipients = be_curl_slist_append(recipients, "<\(recipient)>")
    defer { be_curl_slist_free_all(recipients) }
    // Allocated, not an array: curl writes into it during perform, after any closure would end.
    let failure = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
    failure.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
    defer { failure.deallocate() }
    let context = Unmanaged.passUnretained(source).toOpaque()
    var status = be_curl_setopt_string(curl, CURLOPT_URL, settings.url)
    func set(_ result: CURLcode) { if status == CURLE_OK { status = result } }
    set(be_curl_setopt_string(curl, CURLOPT_MAIL_FROM, "<\(settings.envelopeFrom)>"))
    set(be_curl_setopt_slist(curl, CURLOPT_MAIL_RCPT, recipients))
    set(be_curl_setopt_long(curl, CURLOPT_UPLOAD, 1))
    set(
      be_curl_setopt_read(curl) { buffer, size, count, context in
        guard let buffer, let context else { return 0 }
        return Unmanaged<MessageSource>.fromOpaque(context).takeUnretainedValue().read(
          into: buffer, size * count)
      })
    set(be_curl_setopt_pointer(curl, CURLOPT_READDATA, context))
    set(
      be_curl_setopt_long(
        curl, CURLOPT_USE_SSL, Int(settings.requiresTLS ? CURLUSESSL_ALL.rawValue : CURLUSESSL_NONE.rawValue))
    )
    set(be_curl_setopt_long(curl, CURLOPT_TIMEOUT_MS, Int(DatabaseSettings.milliseconds(settings.timeout))))
    set(be_curl_setopt_long(curl, CURLOPT_NOSIGNAL, 1))
    set(be_curl_setopt_string(curl, CURLOPT_PROTOCOLS_STR, "smtp,smtps"))
    if let username = settings.username { set(be_curl_setopt_string(curl, CURLOPT_USERNAME, username)) }
    if let password = settings.password { set(be_curl_setopt_string(curl, CURLOPT_PASSWORD, password)) }
    set(be_curl_setopt_pointer(curl, CURLOPT_ERRORBUFFER, failure))
    guard status == CURLE_OK else {
      return "libcurl refused an option: \(String(cString: be_curl_easy_strerror(status)))"
    }
    // The source is read through an unretained pointer until perform returns.
    let result = withExtendedLifetime(source) { be_curl_easy_perform(curl) }
    guard result == CURLE_OK else {
      let detail = String(cString: failure)
      var code = 0
      _ = withUnsafeMutablePointer(to: &code) { be_curl_getinfo_long(curl, CURLINFO_RESPONSE_CODE, $0) }
      let reason = detail.isEmpty ? String(cString: be_curl_easy_strerror(result)) : detail
      return "SMTP delivery failed: \(reason)\(code > 0 ? " (server answered \(code))" : "")"
    }
    return nil
  }

  /// The message bytes libcurl reads as the upload.
  private final class MessageSource {
    package let bytes: [UInt8]
    package var offset = 0
    package init(_ bytes: [UInt8]) { self.bytes = bytes }

    package func read(into buffer: UnsafeMutablePointer<CChar>, _ capacity: Int) -> Int {
      let count = min(capacity, bytes.count - offset)
      guard count > 0 else { return 0 }
      bytes.withUnsafeBufferPointer { source in
        UnsafeMutableRawPointer(buffer).copyMemory(from: source.baseAddress! + offset, byteCount: count)
      }
      offset += count
      return count
    }
  }
}
