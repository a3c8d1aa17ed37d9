extension StoreCopy {
  /// Every row of `table` in `database`, each value of its column's declared type or null, text as
  /// valid UTF-8. Anything else (a REAL in an INTEGER column, a BLOB in a TEXT column, text that is
  /// not UTF-8) is refused, naming the table, the column and the row's key, never the value, for
  /// the engine's typed reading would otherwise turn it into something else without a word.
  static func rows(of table: Table, in database: any Database) throws(StoreError) -> [[DatabaseValue]] {
    let keys = table.primaryKey.compactMap { table.columns.firstIndex(of: $0) }
    var rows: [[DatabaseValue]] = []
    switch database.dialect {
    case .sqlite:
      // SQLite keeps any value in any column: its storage class says what the row really holds,
      // and text is read as its bytes, to be checked as UTF-8 here rather than repaired.
      let selected = table.columns.map { column in
        "typeof(\(column)), " + (table.types[column] == .text ? "CAST(\(column) AS BLOB)" : column)
      }
      for (index, raw) in try database.query(
        "SELECT \(selected.joined(separator: ", ")) FROM \(table.name)"
      ).enumerated() {
        var row: [DatabaseValue] = []
        var problem: (column: Int, text: String)? = nil
        var faulty: Set<Int> = []
        for (i, column) in table.columns.enumerated() {
          let (storage, value) = (raw[2 * i], raw[2 * i + 1])
          let declared = table.types[column]
          if case .text(let kind) = storage, kind != "null", let declared, kind != declared.rawValue {
            problem =
              problem ?? (i, "holds \(article(kind)) value where the schema declares \(declared.rawValue)")
            faulty.insert(i)
            row.append(.null)
          } else if declared == .text, case .blob(let bytes) = value {
            if let text = String(validating: bytes, as: UTF8.self) {
              row.append(.text(text))
            } else {
              problem = problem ?? (i, "holds text that is not valid UTF-8")
              faulty.insert(i)
              row.append(.null)
            }
          } else {
            row.append(value)
          }
        }
        if let problem { throw refusal(table, row, keys: keys, faulty: faulty, index: index, problem) }
        rows.append(row)
      }
    case .postgres:
      for (index, row) in try database.query(
        "SELECT \(table.columns.joined(separator: ", ")) FROM \(table.name)"
      ).enumerated() {
        for (i, column) in table.columns.enumerated() {
          guard let declared = table.types[column], let kind = kind(of: row[i]), kind != declared else {
            continue
          }
          throw refusal(
            table, row, keys: keys, faulty: [i], index: index,
            (i, "holds \(article(kind.rawValue)) value where the schema declares \(declared.rawValue)"))
        }
        rows.append(row)
      }
    }
    return rows
  }

  /// The declared type a value has, nil for null.
  private static func kind(of value: DatabaseValue) -> ColumnType? {
    switch value {
    case .null: nil
    case .integer: .integer
    case .text: .text
    case .blob: .blob
    }
  }

  private static func article(_ kind: String) -> String {
    "\(kind.first.map { "aeiou".contains($0) } == true ? "an" : "a") \(kind)"
  }

  /// The error for a value copy-store will not copy: the table, the column and the row's key (the
  /// row's place in the read when the key itself is at fault, `faulty` holding every column that
  /// is), never the value.
  private static func refusal(
    _ table: Table, _ row: [DatabaseValue], keys: [Int], faulty: Set<Int>, index: Int,
    _ problem: (column: Int, text: String)
  ) -> StoreError {
    let row =
      keys.isEmpty || keys.contains(where: faulty.contains)
      ? "row \(index + 1) as read"
      : "the row with " + keys.map { "\(table.columns[$0]) \(keyText(row[$0]))" }.joined(separator: ", ")
    return StoreError.failed(
      "copy-store refuses \(table.name).\(table.columns[problem.column]) in \(row): it \(problem.text); "
        + "correct the source and copy again (nothing was written)")
  }

  /// A key value as a message shows it: integers and text as they are, blobs in hex.
  private static func keyText(_ value: DatabaseValue) -> String {
    switch value {
    case .null: "null"
    case .integer(let n): String(n)
    case .text(let s): "'\(s)'"
    case .blob(let bytes):
      "x'"
        + bytes.map { byte in
          let digits = Array("0123456789abcdef")
          return String([digits[Int(byte >> 4)], digits[Int(byte & 15)]])
        }.joined() + "'"
    }
  }
}
