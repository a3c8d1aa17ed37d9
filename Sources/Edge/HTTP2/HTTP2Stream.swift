import Glibc

/// One request stream, from its first HEADERS until the session closes it: its head (every name and
/// value laid out in one buffer, as HTTP/1's parser does, so no string is made for a field nobody
/// reads), its body so far, and its answer's body being sent. The dispatcher decides a head from it
/// directly (`HeadFields`, `path`); a `Request` is built (`request()`) only for a route that reads
/// one. The session finds it by number in its `StreamTable` (unretained), and reuses it for a later
/// stream (`reuse`), buffers and all. A class, so the session changes it in place.
final class HTTP2Stream: HeadFields {
  private(set) var id: Int32
  /// Its neighbours among the open streams (`OpenList`).
  private var previous: Unmanaged<HTTP2Stream>?
  private var next: Unmanaged<HTTP2Stream>?
  /// Whether the client may still send on it (its request has not ended, nor was it refused or
  /// reset).
  var receiving = true
  /// Body bytes it holds of the process's allowance (given back when it closes).
  var reserved = 0
  /// Its answer's body, while some of it is still to be sent.
  var outgoing: Outgoing?
  /// Answered before its request ended, with a body that is large or refused: a RST_STREAM NO_ERROR
  /// follows the answer's end (RFC 9113 §8.1), so the client stops sending it.
  var resetAfterAnswer = false
  /// The head's bytes and where each regular field lies in them, in memory the record owns (no
  /// reference counting when a field is read; kept across streams, trimmed when a head was large).
  private var bytes: UnsafeMutablePointer<UInt8>
  private var byteCount = 0
  private var byteCapacity = HTTP2Stream.headCapacity
  private var fields: UnsafeMutablePointer<HTTPFields.Field>
  private var kept = 0
  private var fieldCapacity = HTTP2Stream.fieldCapacity
  static let headCapacity = 256
  static let fieldCapacity = 16
  var method: HTTPMethod?
  var target: Range<Int>?
  var authority: Range<Int>?
  /// The first `host` field's value.
  var host: Range<Int>?
  /// `cookie` fields seen: a client may split the cookie list into one field per cookie.
  var cookies = 0
  var body: [UInt8] = []
  /// Header-list bytes so far (RFC 9113 §6.5.2), and regular fields.
  var fieldBytes = 0
  var fieldCount = 0
  var fieldsTooLarge = false
  /// Whether the head was handed on before the body.
  var headFirst = false
  var bodyLimit: Int
  /// Whether DATA is dropped (the stream was answered on its head, or refused).
  var discarding = false
  /// Body bytes dropped so far.
  var dropped = 0
  /// Whether the stream is to be reset (NO_ERROR) once it is answered: a body nobody reads is
  /// large, or was refused. Otherwise an answered stream stays open until the client ends it, so
  /// that what still arrives on it is checked as on any open stream (RFC 9113 §8.1 allows both).
  var resetWanted = false
  /// Whether the answer is queued, and whether its last frame (END_STREAM) is sent.
  var answered = false
  var answerEnded = false
  var progressed = false
  /// The client ended its side (END_STREAM received, or its request was cut off).
  var remoteEnded = false
  /// Flow control (RFC 9113 §6.9): what this server may still send on the stream, what the client
  /// may still send, and what it sent since the last WINDOW_UPDATE.
  var sendWindow = 0
  var receiveWindow = 0
  var receiveConsumed = 0
  /// `content-length` as the request gave it, and the DATA bytes received (§8.1.1).
  var contentLength: Int? = nil
  var dataReceived = 0
  /// The header block being read broke §8.1.1/§8.2 (a stream error), or announced a bad length.
  var malformed = false
  /// A regular field has been read in the block (pseudo-fields must come first, §8.3).
  var regularSeen = false
  /// The pseudo-fields read in the block, one bit each (:method, :scheme, :path, :authority).
  var pseudoSeen: UInt8 = 0
  /// Waiting in the session's list of streams with a body to send.
  var queuedToSend = false

  /// A response body being sent, and how far.
  struct Outgoing {
    /// Keeps the bytes until the answer is sent.
    let body: Response.Body
    /// The same bytes when shared (sent without copying), for reading without retaining them:
    /// `body` keeps them.
    let shared: Unmanaged<SharedBytes>?
    let count: Int
    var sent = 0

    init(body: Response.Body) {
      self.body = body
      if case .shared(let bytes) = body { shared = Unmanaged.passUnretained(bytes) } else { shared = nil }
      count = body.count
    }
  }

  init(id: Int32, bodyLimit: Int) {
    self.id = id
    self.bodyLimit = bodyLimit
    bytes = .allocate(capacity: Self.headCapacity)
    fields = .allocate(capacity: Self.fieldCapacity)
  }

  deinit {
    bytes.deallocate()
    fields.deallocate()
  }

  /// Makes a closed stream's record that of a new stream, keeping its buffers' capacity.
  func reuse(id: Int32, bodyLimit: Int) {
    self.id = id
    self.bodyLimit = bodyLimit
    receiving = true
    reserved = 0
    outgoing = nil
    resetAfterAnswer = false
    clearHead()
    body = []
    method = nil
    target = nil
    authority = nil
    host = nil
    cookies = 0
    fieldBytes = 0
    fieldCount = 0
    fieldsTooLarge = false
    headFirst = false
    discarding = false
    dropped = 0
    resetWanted = false
    answered = false
    answerEnded = false
    progressed = false
    remoteEnded = false
    sendWindow = 0
    receiveWindow = 0
    receiveConsumed = 0
    contentLength = nil
    dataReceived = 0
    malformed = false
    regularSeen = false
    pseudoSeen = 0
    queuedToSend = false
  }

  /// The head's bytes in `range`.
  private func head(_ range: Range<Int>) -> UnsafeBufferPointer<UInt8> {
    UnsafeBufferPointer(start: bytes + range.lowerBound, count: range.count)
  }

  /// Whether the request has both `:authority` and `host` and they differ (ASCII case aside).
  var authorityDisagrees: Bool {
    guard let authority, let host else { return false }
    return !head(authority).elementsEqual(head(host)) { ASCII.lower($0) == ASCII.lower($1) }
  }

  /// Appends `count` bytes at `pointer`; returns where they lie.
  func append(_ pointer: UnsafePointer<UInt8>, _ count: Int) -> Range<Int> {
    if byteCount + count > byteCapacity {
      // The session bounds a head's bytes (SETTINGS_MAX_HEADER_LIST_SIZE), so this stays small.
      byteCapacity = max(byteCount + count, 2 * byteCapacity)
      let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: byteCapacity)
      grown.update(from: bytes, count: byteCount)
      bytes.deallocate()
      bytes = grown
    }
    (bytes + byteCount).update(from: pointer, count: count)
    byteCount += count
    return (byteCount - count)..<byteCount
  }

  /// Keeps a regular field (name and value as the session checked them).
  func addField(
    _ name: UnsafePointer<UInt8>, _ nameLength: Int, _ value: UnsafePointer<UInt8>, _ valueLength: Int
  ) -> Range<Int> {
    let n = append(name, nameLength)
    let v = append(value, valueLength)
    if kept == fieldCapacity {
      fieldCapacity *= 2
      let grown = UnsafeMutablePointer<HTTPFields.Field>.allocate(capacity: fieldCapacity)
      grown.update(from: fields, count: kept)
      fields.deallocate()
      fields = grown
    }
    fields[kept] = .init(
      nameStart: Int32(n.lowerBound), nameEnd: Int32(n.upperBound), valueStart: Int32(v.lowerBound),
      valueEnd: Int32(v.upperBound))
    kept += 1
    return v
  }

  /// Its fields passed a limit: none is kept (the method and `:path` are, for the refusal).
  func dropFields() { kept = 0 }

  /// The stream was answered on its head: nothing reads its head or body again.
  func dropHead() {
    body = []
    clearHead()
  }

  /// No head: its buffers are kept (at their first size) for the next.
  private func clearHead() {
    if byteCapacity > 4 * Self.headCapacity {
      bytes.deallocate()
      bytes = .allocate(capacity: Self.headCapacity)
      byteCapacity = Self.headCapacity
    }
    if fieldCapacity > 4 * Self.fieldCapacity {
      fields.deallocate()
      fields = .allocate(capacity: Self.fieldCapacity)
      fieldCapacity = Self.fieldCapacity
    }
    byteCount = 0
    kept = 0
    target = nil
    authority = nil
    host = nil
  }

  // MARK: the head, as the dispatcher reads it

  /// The method (GET when the head had none: the session refuses such a request before it ends).
  var requestMethod: HTTPMethod { method ?? .get }

  /// The path part of `:path` (no query), still percent-encoded; "/" when empty. A path that is
  /// one of `router`'s exact routes is that route's string (no copy).
  func path(_ router: Router) -> String {
    guard let target else { return "/" }
    let raw = head(target)
    return router.path(UnsafeBufferPointer(rebasing: raw[Request.targetParts(raw).path]))
  }

  /// `:path` as received (path and query).
  /// The target's first byte (0 without a target).
  var targetFirstByte: UInt8 { target.map { bytes[$0.lowerBound] } ?? 0 }

  var targetString: String { target.map { String(decoding: head($0), as: UTF8.self) } ?? "/" }

  /// The session refuses names that are not lower case (RFC 9113 §8.2.1), so names compare byte for
  /// byte.
  func value(_ name: StaticString) -> String? {
    let length = name.utf8CodeUnitCount
    var found: String? = nil
    for i in 0..<kept where Int(fields[i].nameEnd - fields[i].nameStart) == length {
      let field = fields[i]
      guard memcmp(bytes + Int(field.nameStart), name.utf8Start, length) == 0 else { continue }
      let value = String(decoding: head(Int(field.valueStart)..<Int(field.valueEnd)), as: UTF8.self)
      found = found.map { $0 + ", " + value } ?? value
    }
    return found
  }

  /// The HTTP/1 shape every handler knows (`Host` from `:authority`, cookie crumbs joined), over a
  /// copy of the stream's head.
  func request() -> Request {
    var bytes = Array(head(0..<byteCount))
    var fields = Array(UnsafeBufferPointer(start: self.fields, count: kept))
    if cookies > 1 { Self.joinCookies(&bytes, &fields) }
    if let authority, host == nil {
      let name = bytes.count
      bytes += "host".utf8
      fields.insert(
        .init(
          nameStart: Int32(name), nameEnd: Int32(name + 4), valueStart: Int32(authority.lowerBound),
          valueEnd: Int32(authority.upperBound)), at: 0)
    }
    let target: Range<Int>
    if let known = self.target {
      target = known
    } else {
      bytes.append(UInt8(ascii: "/"))
      target = (bytes.count - 1)..<bytes.count
    }
    let split = Request.splitTarget(bytes[target])
    return Request(
      method: requestMethod, version: .http11, targetRange: target,
      queryStart: split.queryStart.map { target.lowerBound + $0 }, path: split.path,
      headers: HTTPFields(bytes: bytes, fields: fields), body: body, trailers: .empty, keepAlive: true,
      expectsContinue: false)
  }

  /// RFC 9113 §8.2.3: cookie crumbs are joined with "; " into one field, as HTTP/1 carries it.
  private static func joinCookies(_ bytes: inout [UInt8], _ fields: inout [HTTPFields.Field]) {
    func isCookie(_ f: HTTPFields.Field, _ bytes: [UInt8]) -> Bool {
      f.nameEnd - f.nameStart == 6 && bytes[Int(f.nameStart)..<Int(f.nameEnd)].elementsEqual("cookie".utf8)
    }
    let crumbs = fields.filter { isCookie($0, bytes) }
    let name = bytes.count
    bytes += "cookie".utf8
    let value = bytes.count
    for (i, crumb) in crumbs.enumerated() {
      if i > 0 { bytes += "; ".utf8 }
      let crumbValue = Array(bytes[Int(crumb.valueStart)..<Int(crumb.valueEnd)])
      bytes += crumbValue
    }
    let at = fields.firstIndex { isCookie($0, bytes) } ?? fields.count
    fields.removeAll { isCookie($0, bytes) }
    fields.insert(
      .init(
        nameStart: Int32(name), nameEnd: Int32(value), valueStart: Int32(value), valueEnd: Int32(bytes.count)),
      at: min(at, fields.count))
  }
}

extension HTTP2Stream {
  /// The records of the open streams, linked through the records themselves: the list owns one
  /// reference to each (taken on `insert`, handed back by `remove`), so that opening and closing a
  /// stream costs no array traffic, and the session's table (unretained pointers) stays valid while
  /// the stream is open.
  struct OpenList {
    private var first: Unmanaged<HTTP2Stream>?
    private(set) var count = 0

    /// Keeps `record` until `remove`; returns the pointer the session's table keeps.
    mutating func insert(_ record: HTTP2Stream) -> Unmanaged<HTTP2Stream> {
      let reference = Unmanaged.passRetained(record)
      record.previous = nil
      record.next = first
      first?._withUnsafeGuaranteedRef { $0.previous = reference }
      first = reference
      count += 1
      return reference
    }

    /// Unlinks the record `reference` points at and hands back the list's reference to it.
    mutating func remove(_ reference: Unmanaged<HTTP2Stream>) -> HTTP2Stream {
      let record = reference.takeRetainedValue()
      let (previous, next) = (record.previous, record.next)
      if let previous {
        previous._withUnsafeGuaranteedRef { $0.next = next }
      } else {
        first = next
      }
      next?._withUnsafeGuaranteedRef { $0.previous = previous }
      record.previous = nil
      record.next = nil
      count -= 1
      return record
    }

    /// Lets go of every record (the session is ending); returns the budget bytes they held.
    /// Calls `body` with every record on the list.
    func forEach(_ body: (HTTP2Stream) -> Void) {
      var at = first
      while let reference = at {
        at = reference._withUnsafeGuaranteedRef { record in
          body(record)
          return record.next
        }
      }
    }

    mutating func releaseAll() -> Int {
      var held = 0
      while let reference = first {
        held += reference._withUnsafeGuaranteedRef { $0.reserved }
        _ = remove(reference)
      }
      return held
    }
  }
}
