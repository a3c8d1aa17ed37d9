extension StoreCopy {
  /// The tables migrations 1...`version` leave, in the order they were made (a table refers only to
  /// tables made before it, so this order inserts parents first). Read from `Migrations.steps`, so
  /// the list cannot drift from the schema; a statement this reader does not know is an error
  /// (the tests read every migration), never a table silently left out.
  public static func tables(upTo version: Int = Migrations.latest) throws(StoreError) -> [Table] {
    var tables: [Table] = []
    for (index, step) in Migrations.steps.prefix(max(0, version)).enumerated() {
      for statement in statements(of: step) {
        do {
          try apply(statement, to: &tables)
        } catch {
          throw StoreError.failed("copy-store cannot read migration \(index + 1): \(error.description)")
        }
      }
    }
    return tables
  }

  /// The statements of `sql`: comments dropped, split at semicolons outside quoted text.
  static func statements(of sql: String) -> [String] {
    var statements: [String] = []
    var current = ""
    var quote: Character? = nil
    for line in sql.split(separator: "\n", omittingEmptySubsequences: false) {
      var previous: Character? = nil
      for c in line {
        if let q = quote {
          if c == q { quote = nil }
        } else if c == "'" || c == "\"" {
          quote = c
        } else if c == "-" && previous == "-" {
          current.removeLast()
          break
        } else if c == ";" {
          statements.append(current)
          current = ""
          previous = nil
          continue
        }
        current.append(c)
        previous = c
      }
      current.append(" ")
    }
    statements.append(current)
    return statements.map { $0.split(whereSeparator: \.isWhitespace).joined(separator: " ") }.filter {
      !$0.isEmpty
    }
  }

  /// `tables` after one statement of a migration.
  static func apply(_ statement: String, to tables: inout [Table]) throws(StoreError) {
    let words = statement.split(separator: " ").map(String.init)
    let upper = words.map { $0.uppercased() }
    func index(of name: String) throws(StoreError) -> Int {
      guard let i = tables.firstIndex(where: { $0.name == name }) else {
        throw StoreError.failed("'\(statement)' names a table no earlier migration made")
      }
      return i
    }
    func word(_ i: Int) throws(StoreError) -> String {
      guard i < words.count else { throw StoreError.failed("'\(statement)' ends too soon") }
      return words[i]
    }
    switch (upper.first, upper.dropFirst().first) {
    case ("CREATE", "TABLE"):
      tables.append(try createdTable(statement))
    case ("CREATE", "INDEX"), ("CREATE", "UNIQUE"), ("DROP", "INDEX"), ("DELETE", _), ("UPDATE", _),
      ("INSERT", _):
      return
    case ("DROP", "TABLE"):
      let name = try identifier(try word(upper[safe: 2] == "IF" ? 4 : 2))
      tables.remove(at: try index(of: name))
    case ("ALTER", "TABLE"):
      let t = try index(of: try identifier(try word(2)))
      let action = upper[safe: 3] ?? ""
      let named = upper[safe: 4] == "COLUMN" ? 5 : 4
      switch action {
      case "ADD":
        let column = try identifier(try word(named))
        tables[t].columns.append(column)
        tables[t].types[column] = try columnType(try word(named + 1), in: statement)
      case "DROP":
        let column = try identifier(try word(named))
        tables[t].columns.removeAll { $0 == column }
        tables[t].types[column] = nil
      case "RENAME" where upper[safe: 4] == "TO":
        tables[t].name = try identifier(try word(5))
      case "RENAME":
        let (old, new) = (try identifier(try word(named)), try identifier(try word(named + 2)))
        guard upper[safe: named + 1] == "TO", tables[t].columns.contains(old) else {
          throw StoreError.failed("'\(statement)' renames a column the table does not have")
        }
        tables[t].columns = tables[t].columns.map { $0 == old ? new : $0 }
        tables[t].primaryKey = tables[t].primaryKey.map { $0 == old ? new : $0 }
        tables[t].types[new] = tables[t].types.removeValue(forKey: old)
        if tables[t].identity == old { tables[t].identity = new }
      default:
        throw StoreError.failed("'\(statement)' is an ALTER TABLE copy-store does not know")
      }
    default:
      throw StoreError.failed("'\(statement.prefix(60))' is a statement copy-store does not know")
    }
  }

  /// The table a `CREATE TABLE name (...)` statement makes.
  private static func createdTable(_ statement: String) throws(StoreError) -> Table {
    guard let open = statement.firstIndex(of: "("), let close = statement.lastIndex(of: ")"), open < close
    else {
      throw StoreError.failed("'\(statement.prefix(60))' has no column list")
    }
    let head = statement[..<open].split(separator: " ").map(String.init)
    guard head.count == 3 else {
      throw StoreError.failed("'\(statement.prefix(60))' is not CREATE TABLE name (...)")
    }
    var table = Table(name: try identifier(head[2]), columns: [], primaryKey: [], identity: nil)
    for item in topLevelItems(statement[statement.index(after: open)..<close]) {
      let words = item.split(separator: " ").map(String.init)
      let upper = item.uppercased()
      switch words.first?.uppercased() {
      case "PRIMARY":
        guard let from = item.firstIndex(of: "("), let to = item.lastIndex(of: ")"), from < to else {
          throw StoreError.failed("'\(item)' is a primary key without columns")
        }
        table.primaryKey = try item[item.index(after: from)..<to].split(separator: ",").map {
          (name) throws(StoreError) -> String in
          try identifier(name.trimmingSpaces)
        }
      case "UNIQUE", "CHECK", "FOREIGN", "CONSTRAINT", nil:
        continue
      default:
        let column = try identifier(words[0])
        table.columns.append(column)
        guard words.count > 1 else { throw StoreError.failed("'\(item)' declares no type") }
        table.types[column] = try columnType(words[1], in: item)
        if upper.contains("PRIMARY KEY") { table.primaryKey = [column] }
        if upper.contains("AUTOINCREMENT") { table.identity = column }
      }
    }
    guard !table.columns.isEmpty else {
      throw StoreError.failed("'\(statement.prefix(60))' makes no columns")
    }
    return table
  }

  /// The declared type `word` names: INTEGER, TEXT or BLOB (all the migrations use), else an error.
  private static func columnType(_ word: String, in text: String) throws(StoreError) -> ColumnType {
    guard let type = ColumnType(rawValue: word.lowercased()) else {
      throw StoreError.failed("'\(text.prefix(60))' declares a type copy-store does not know")
    }
    return type
  }

  /// The comma-separated items of a column list, commas inside parentheses left alone.
  private static func topLevelItems(_ body: Substring) -> [String] {
    var items: [String] = []
    var current = ""
    var depth = 0
    var quote: Character? = nil
    for c in body {
      if let q = quote {
        if c == q { quote = nil }
      } else if c == "'" || c == "\"" {
        quote = c
      } else if c == "(" {
        depth += 1
      } else if c == ")" {
        depth -= 1
      } else if c == "," && depth == 0 {
        items.append(current.trimmingSpaces)
        current = ""
        continue
      }
      current.append(c)
    }
    items.append(current.trimmingSpaces)
    return items.filter { !$0.isEmpty }
  }

  /// `text` when it is a plain lower-case SQL name (safe to write into a statement), else an error.
  private static func identifier(_ text: some StringProtocol) throws(StoreError) -> String {
    let bytes = Array(text.utf8)
    let valid =
      !bytes.isEmpty && !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[0])
      && bytes.allSatisfy {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || $0 == UInt8(ascii: "_")
          || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
      }
    guard valid else { throw StoreError.failed("'\(text)' is not a plain lower-case name") }
    return String(text)
  }
}

extension Array {
  fileprivate subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}

extension StringProtocol {
  fileprivate var trimmingSpaces: String {
    String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
  }
}
