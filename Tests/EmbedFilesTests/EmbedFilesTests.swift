import Foundation
import Testing

/// Plugins/EmbedFiles through the compiler: each fixture listed in this target's embedded-files.txt
/// must come back from `EmbeddedFiles` byte for byte.
@Suite("Files compiled in by Plugins/EmbedFiles")
struct EmbedFilesTests {
  static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .appendingPathComponent("Fixtures")

  @Test("delimiters, escapes, line breaks, controls and non-ASCII text come back byte for byte")
  func tricky() throws {
    let file = try Data(contentsOf: Self.fixtures.appendingPathComponent("tricky.txt"))
    #expect(
      Data(EmbeddedFiles.tricky.utf8) == file,
      "\(EmbeddedFiles.tricky.debugDescription) is not \(String(decoding: file, as: UTF8.self).debugDescription)"
    )
    // The fixture still holds the hard cases.
    #expect(file.starts(with: Data("\u{FEFF}A".utf8)))
    for piece in ["\"\"\"#", "\\(name)", "\\\n", "\r\n", "\r ", "\0", "e\u{301}", "\u{1F3BA}", "\u{10FFFF}"] {
      #expect(file.range(of: Data(piece.utf8)) != nil, "\(piece.debugDescription)")
    }
    #expect(file.last != UInt8(ascii: "\n"))
  }

  @Test("an empty file is the empty string")
  func empty() {
    #expect(EmbeddedFiles.empty.isEmpty)
  }
}
