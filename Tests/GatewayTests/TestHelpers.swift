import Foundation
import Synchronization
import Testing

@testable import Accounts
@testable import Gateway

/// Bytes from hexadecimal text (test vectors are printed that way).
func hex(_ text: String) -> [UInt8] {
  var bytes: [UInt8] = []
  var index = text.startIndex
  while index < text.endIndex {
    let next = text.index(index, offsetBy: 2)
    bytes.append(UInt8(text[index..<next], radix: 16) ?? 0)
    index = next
  }
  return bytes
}

/// The bytes of base64url text without padding, or nil.
func base64url(decoding text: some StringProtocol) -> [UInt8]? {
  var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
  standard += String(repeating: "=", count: (4 - standard.count % 4) % 4)
  return Data(base64Encoded: standard).map { Array($0) }
}

/// A compact JWS's three parts: the header's JSON, the payload's JSON, and whether the signature
/// verifies under `publicKey`.
func openJWS(_ compact: String, publicKey: [UInt8]) throws -> (
  header: String, payload: String, verified: Bool
) {
  let parts = compact.split(separator: ".", omittingEmptySubsequences: false)
  try #require(parts.count == 3)
  let header = try #require(base64url(decoding: parts[0]))
  let payload = try #require(base64url(decoding: parts[1]))
  let signature = try #require(base64url(decoding: parts[2]))
  let input = Array("\(parts[0]).\(parts[1])".utf8)
  return (
    String(decoding: header, as: UTF8.self), String(decoding: payload, as: UTF8.self),
    SigningKey.verify(signature, of: input, publicKey: publicKey)
  )
}

/// Runs `body(i)` for i in 0..<count on as many threads at once, and returns what each gave.
func together<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) -> T) -> [T] {
  let results = Mutex<[Int: T]>([:])
  DispatchQueue.concurrentPerform(iterations: count) { i in
    let value = body(i)
    results.withLock { $0[i] = value }
  }
  return results.withLock { dictionary in (0..<count).compactMap { dictionary[$0] } }
}
