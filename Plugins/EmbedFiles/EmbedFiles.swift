import Foundation
import PackagePlugin

/// Compiles data files into a target, so that the one static binary carries them (no resource
/// bundle beside it). The target's own `embedded-files.txt` lists them, one `NAME PATH` a line
/// (PATH from the package directory; `#` starts a comment line), and the target gets
/// `EmbeddedFiles.NAME`, a `String` equal to the file, written by `EmbedTool` at build time. The
/// list and every listed file are inputs of that step: editing one rebuilds the target, and SwiftPM
/// counts them as handled (no "unhandled file" warning, no `exclude:` needed).
///
/// EmbedTool reads and checks the list itself; this plugin reads it only for the inputs to declare,
/// and SwiftPM runs it only when it plans a build (the first, or after Package.swift or a target's
/// set of files changed). So an edited list takes effect at the next build, but a file newly listed
/// is watched for edits, and a file unlisted and deleted stops being a "missing input", only from
/// the next plan on: `touch Package.swift` forces one.
@main
struct EmbedFiles: BuildToolPlugin {
  func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
    guard
      let list = (target as? SourceModuleTarget)?.sourceFiles.first(where: {
        $0.url.lastPathComponent == "embedded-files.txt"
      })?.url
    else { throw EmbedFilesError("\(target.name): no embedded-files.txt lists the files to embed") }
    guard let text = try? String(contentsOf: list, encoding: .utf8) else {
      throw EmbedFilesError("\(list.path(percentEncoded: false)): cannot be read")
    }
    let paths = text.split(separator: "\n").compactMap { line in
      let fields = line.split(whereSeparator: \.isWhitespace)
      return fields.count == 2 && !fields[0].hasPrefix("#") ? String(fields[1]) : nil
    }
    let root = context.package.directoryURL
    let output = context.pluginWorkDirectoryURL.appending(component: "EmbeddedFiles.swift")
    return [
      .buildCommand(
        displayName: "Embedding \(paths.count) files in \(target.name) (embedded-files.txt)",
        executable: try context.tool(named: "EmbedTool").url,
        arguments: [output, root, list].map { $0.path(percentEncoded: false) },
        inputFiles: [list] + paths.map { root.appending(path: $0) },
        outputFiles: [output])
    ]
  }
}

struct EmbedFilesError: Error, CustomStringConvertible {
  let description: String
  init(_ description: String) { self.description = description }
}
