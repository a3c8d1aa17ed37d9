import Foundation
import TestSupport
import Testing

@testable import Accounts
@testable import Gateway

@Suite("The key-encryption key: its file, and sealing keys bound to their row")
struct KeyEncryptionKeyTests {
  static let digits = String(repeating: "0123456789abcdef", count: 4)

  /// A file at a new path holding `text` with `mode`.
  static func file(_ text: String, mode: Int = 0o600) throws -> String {
    let path = try TestDirectory.make("kek").appendingPathComponent("kek").path
    #expect(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
    #expect(chmod(path, mode_t(mode)) == 0)
    return path
  }

  /// File texts, and whether each is a KEK.
  static let formats: [(String, Bool)] = {
    let short = String(digits.dropLast())
    let base64 = Secrets.base64url([UInt8](repeating: 7, count: 32))
    let texts: [String] = [digits, digits + "\n", digits.uppercased(), digits + "\n\n", short, digits + "0"]
    let more: [String] = [" " + digits, "", short + "g", base64]
    return zip(texts + more, [true, true, true, false, false, false, false, false, false, false]).map {
      ($0, $1)
    }
  }()

  @Test("the file holds 64 hex digits and at most one newline", arguments: formats)
  func format(_ text: String, _ accepted: Bool) throws {
    let path = try Self.file(text)
    let key = try? KeyEncryptionKey.load(path: path)
    #expect((key != nil) == accepted)
  }

  @Test(
    "only a file no one but its owner may use is loaded",
    arguments: [(0o600, true), (0o400, true), (0o640, false), (0o604, false), (0o660, false), (0o620, false)])
  func mode(_ mode: Int, _ accepted: Bool) throws {
    let path = try Self.file(Self.digits, mode: mode)
    if accepted {
      #expect(throws: Never.self) { try KeyEncryptionKey.load(path: path) }
    } else {
      #expect { try KeyEncryptionKey.load(path: path) } throws: { "\($0)".contains("chmod 600") }
    }
  }

  @Test("a missing file, a directory or another user's file is refused, saying why")
  func refusals() throws {
    let directory = try TestDirectory.make("kek")
    #expect {
      try KeyEncryptionKey.load(path: directory.appendingPathComponent("none").path)
    } throws: { "\($0)".contains("does not exist; make one with (umask 077; openssl rand -hex 32 > FILE)") }
    #expect(chmod(directory.path, 0o700) == 0)
    #expect { try KeyEncryptionKey.load(path: directory.path) } throws: {
      "\($0)".contains("not a regular file")
    }
    let path = try Self.file(Self.digits)
    if geteuid() == 0 {
      #expect(chown(path, 65534, 65534) == 0)
      #expect { try KeyEncryptionKey.load(path: path) } throws: { "\($0)".contains("is owned by uid 65534") }
    }
  }

  @Test("createIfAbsent makes a 0600 file once, then reads the same key")
  func create() throws {
    let path = try TestDirectory.make("kek").appendingPathComponent("gateway.kek").path
    let made = try KeyEncryptionKey.createIfAbsent(path: path)
    var info = stat()
    #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
    let text = try String(contentsOfFile: path, encoding: .utf8)
    #expect(text.count == 65 && text.hasSuffix("\n"))
    #expect(made.fileText == Array(text.utf8))
    #expect(try KeyEncryptionKey.createIfAbsent(path: path).fileText == made.fileText)
    #expect(try KeyEncryptionKey.load(path: path).fileText == made.fileText)
    let leftovers = try FileManager.default.contentsOfDirectory(
      atPath: (path as NSString).deletingLastPathComponent)
    #expect(leftovers == ["gateway.kek"])
  }

  @Test("several processes' worth of first starts agree on one key")
  func createConcurrently() throws {
    let path = try TestDirectory.make("kek").appendingPathComponent("gateway.kek").path
    let texts = together(8) { _ in (try? KeyEncryptionKey.createIfAbsent(path: path))?.fileText }
    #expect(Set(texts.compactMap { $0 }).count == 1 && texts.count == 8 && !texts.contains(nil))
  }

  @Test("a sealed key opens with its KEK and its kid only; it never holds the key in clear")
  func sealing() throws {
    let kek = try KeyEncryptionKey(bytes: Secrets.randomBytes(32))
    let other = try KeyEncryptionKey(bytes: Secrets.randomBytes(32))
    let secret = Secrets.randomBytes(32)
    let box = try #require(kek.seal(secret, kid: "kid-1"))
    #expect(box.count == 12 + 32 + 16)
    #expect(!box.indices.contains { box[$0...].starts(with: secret.prefix(8)) })
    #expect(kek.open(box, kid: "kid-1") == secret)
    #expect(kek.open(box, kid: "kid-2") == nil, "moved to another row")
    #expect(other.open(box, kid: "kid-1") == nil, "another KEK")
    var altered = box
    altered[20] ^= 1
    #expect(kek.open(altered, kid: "kid-1") == nil)
    #expect(kek.seal(secret, kid: "kid-1") != box, "a fresh nonce each time")
  }
}
