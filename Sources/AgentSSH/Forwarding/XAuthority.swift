import AgentCore

/// The Xauthority file X clients read their display's cookie from (libXau's format: per
/// entry a big-endian uint16 family, then address, display number, protocol name and data,
/// each a big-endian uint16 length and its bytes).
enum XAuthority {
    /// `FamilyLocal`: an entry for this host by name (what `localhost:N` displays use).
    static let familyLocal: UInt16 = 256
    /// An existing file larger than this is not read (the entry is not added).
    static let maxFileBytes = 1 << 20

    struct Entry: Equatable {
        var family: UInt16
        var address: [UInt8]
        var number: [UInt8]
        var name: [UInt8]
        var data: [UInt8]

        var encoded: [UInt8] {
            var bytes = withUnsafeBytes(of: family.bigEndian, Array.init)
            for field in [address, number, name, data] {
                bytes += withUnsafeBytes(of: UInt16(field.count).bigEndian, Array.init) + field
            }
            return bytes
        }
    }

    struct Failure: Error, CustomStringConvertible { let description: String }

    /// The entries in `bytes`; nil when they do not parse.
    static func parse(_ bytes: [UInt8]) -> [Entry]? {
        var entries: [Entry] = []
        var index = 0
        func field() -> [UInt8]? {
            guard index + 2 <= bytes.count else { return nil }
            let length = Int(bytes[index]) << 8 | Int(bytes[index + 1])
            guard index + 2 + length <= bytes.count else { return nil }
            defer { index += 2 + length }
            return Array(bytes[index + 2..<index + 2 + length])
        }
        while index < bytes.count {
            guard index + 2 <= bytes.count else { return nil }
            let family = UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1])
            index += 2
            guard let address = field(), let number = field(), let name = field(), let data = field() else { return nil }
            entries.append(Entry(family: family, address: address, number: number, name: name, data: data))
        }
        return entries
    }

    /// Adds `entry` to the file at `path`, replacing one for the same host and display,
    /// atomically (``AtomicFile``, mode 0600). A file that is too large or does not parse is
    /// left alone (an error).
    static func add(_ entry: Entry, to path: String) throws {
        var entries: [Entry] = []
        if FileInfo.of(path: path) != nil {
            guard let existing = AtomicFile.read(path, maxBytes: maxFileBytes), let parsed = parse(existing) else {
                throw Failure(description: "\(path) is not an Xauthority file this agent can extend")
            }
            entries = parsed
        }
        entries.removeAll { $0.family == entry.family && $0.address == entry.address && $0.number == entry.number }
        entries.append(entry)
        do {
            try AtomicFile.write(entries.flatMap(\.encoded), to: path)
        } catch {
            throw Failure(description: "write \(path): \(error)")
        }
    }
}
