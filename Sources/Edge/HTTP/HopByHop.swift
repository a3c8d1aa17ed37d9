/// The fields that belong to one connection, not to the message (RFC 9110 §7.6.1): what a proxy
/// removes before it forwards a request or a response.
public enum HopByHop {
  /// Connection-specific whatever `Connection` says: the ones RFC 9110 §7.6.1 names
  /// (`Connection`, `Proxy-Connection`, `Keep-Alive`, `TE`, `Transfer-Encoding`, `Upgrade`), the
  /// proxy credentials of RFC 9110 §11.7, `Trailer` (the framing is rebuilt) and `HTTP2-Settings`
  /// (RFC 7540 §3.2.1, only meaningful with `Upgrade`). Lower case.
  public static let always: Set<String> = [
    "connection", "proxy-connection", "keep-alive", "te", "transfer-encoding", "upgrade", "trailer",
    "proxy-authorization", "proxy-authenticate", "http2-settings",
  ]

  /// The field names the message's `Connection` fields nominate (RFC 9110 §7.6.1), lower case.
  public static func nominated(by fields: [(name: String, value: String)]) -> Set<String> {
    var names: Set<String> = []
    for field in fields where isConnection(field.name) {
      for token in field.value.utf8.split(separator: UInt8(ascii: ",")) {
        let name = token.drop(while: ASCII.isWhitespace).reversed().drop(while: ASCII.isWhitespace)
        if !name.isEmpty { names.insert(String(decoding: name.reversed(), as: UTF8.self).lowercased()) }
      }
    }
    return names
  }

  /// Whether `name` is `Connection`, in any case (bytes compared: this runs for every field of every
  /// forwarded message).
  static func isConnection(_ name: String) -> Bool {
    name.utf8.count == 10 && name.utf8.elementsEqual("connection".utf8) { $0 | 0x20 == $1 }
  }

  /// `fields` without the connection-specific ones: those in `always` and those `Connection`
  /// nominates. Apply it to what was received, before adding any field of one's own, so that no
  /// sender can make a proxy drop what the proxy adds.
  public static func removed(from fields: [(name: String, value: String)]) -> [(name: String, value: String)]
  {
    let named = nominated(by: fields)
    return fields.filter {
      let name = $0.name.lowercased()
      return !always.contains(name) && !named.contains(name)
    }
  }
}
