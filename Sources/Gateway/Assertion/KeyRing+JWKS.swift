extension KeyRing {
  /// The JWKS document at `now` (RFC 7517 §5): `{"keys":[...]}` of the published keys' public JWKs,
  /// oldest first, byte for byte the same for the same ring and time. What
  /// `/.well-known/band-licence/jwks.json` serves (`Cache-Control: public, max-age=300`).
  public func jwks(at now: Int) -> [UInt8] {
    var keys: [UInt8] = [UInt8(ascii: "[")]
    for (index, entry) in published(at: now).enumerated() {
      if index > 0 { keys.append(UInt8(ascii: ",")) }
      keys.append(contentsOf: entry.key.jwk)
    }
    keys.append(UInt8(ascii: "]"))
    var object = JSONObject()
    object.json("keys", keys)
    return object.finished()
  }
}
