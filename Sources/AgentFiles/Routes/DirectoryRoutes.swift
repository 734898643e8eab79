import AgentCore
import AgentHTTP
import FoundationEssentials
import Hummingbird

#if canImport(Glibc)
import Glibc
#endif

/// `POST /list-directory` and `GET /resolve-path` (spec file-api §1).
struct DirectoryRoutes: Sendable {
    let homeDirectory: String

    struct Entry: Encodable, Sendable {
        var name: String
        var absolutePathString: String
        var isDir: Bool

        enum CodingKeys: String, CodingKey {
            case name, absolutePathString = "absolute_path_string", isDir = "is_dir"
        }
    }

    struct Listing: Encodable, Sendable {
        var absolutePath: [String]
        var absolutePathString: String
        var contents: [Entry]
        /// Pagination (beyond the reference): where the next page starts; absent on the last.
        var nextCursor: String?

        enum CodingKeys: String, CodingKey {
            case absolutePath = "absolute_path", absolutePathString = "absolute_path_string", contents
            case nextCursor = "next_cursor"
        }
    }

    /// The largest page.
    static let maxPageSize = 10_000

    /// A cursor names the last entry of a page by its place in the listing's order
    /// (directories first, then names in byte order), so a page boundary stays put while
    /// entries are added or removed elsewhere.
    enum Cursor {
        static func make(_ entry: Entry) -> String {
            let key = [entry.isDir ? UInt8(ascii: "d") : UInt8(ascii: "f")] + FilePathText.encode(entry.name)
            return SHA256.hexString(key)
        }

        static func parse(_ text: String) -> (isDir: Bool, name: [UInt8])? {
            let digits = Array(text.utf8)
            guard digits.count >= 2, digits.count % 2 == 0 else { return nil }
            var bytes: [UInt8] = []
            for index in stride(from: 0, to: digits.count, by: 2) {
                guard let byte = UInt8(String(decoding: digits[index...index + 1], as: UTF8.self), radix: 16) else { return nil }
                bytes.append(byte)
            }
            guard let kind = bytes.first, kind == UInt8(ascii: "d") || kind == UInt8(ascii: "f") else { return nil }
            return (kind == UInt8(ascii: "d"), Array(bytes.dropFirst()))
        }

        /// True when `entry` comes after the cursor's entry in the listing's order.
        static func isAfter(_ entry: Entry, _ cursor: (isDir: Bool, name: [UInt8])) -> Bool {
            if entry.isDir != cursor.isDir { return !entry.isDir }
            return cursor.name.lexicographicallyPrecedes(FilePathText.encode(entry.name))
        }
    }

    /// Lists a directory: directories first, then names in byte order; hidden entries
    /// included; `is_dir` from lstat (a link to a directory is not one).
    func listDirectory(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        var query = StrictQuery(request, allowed: ["path", "limit", "cursor"])
        let queryPath = query.string("path")
        let pageSize = query.int("limit", default: 0)
        let cursorText = query.string("cursor")
        try query.validate()
        let cursor = cursorText.flatMap(Cursor.parse)
        if cursorText != nil, cursor == nil {
            throw APIError(.badRequest, "Query parameters have invalid values.", validations: [.init(field: "cursor", detail: "not a cursor this agent made")])
        }
        let paginated = pageSize > 0 || cursor != nil
        let limit = min(pageSize == 0 ? Self.maxPageSize : pageSize, Self.maxPageSize)
        var request = request
        let bytes = try await request.collectBody(upTo: context.maxUploadSize)
        guard bytes.readableBytes > 0 else { throw APIError(.badRequest, "Request body must be valid JSON.", detail: "empty body") }
        let body = try JSONRequest.parse(bytes.readableBytesView, typeName: "LSRequest")
        let parts = try body.stringArray("path") ?? []
        let relativity = try body.string("relativity") ?? ""
        try PathInput.rejectNUL(queryPath, field: "path")
        for part in parts { try PathInput.rejectNUL(part, field: "path") }
        let directory: String
        if let queryPath {
            guard PathInput.isAbsolute(queryPath) else {
                throw APIError(.internalServerError, "path must be absolute: \(goQuote(queryPath))")
            }
            directory = PathResolver.clean(queryPath)
        } else {
            switch relativity {
            case "root": directory = PathResolver.clean("/" + parts.joined(separator: "/"))
            case "home": directory = PathResolver.clean(homeDirectory + "/" + parts.joined(separator: "/"))
            default: throw APIError(.internalServerError, "unsupported relativity type \(goQuote(relativity))")
            }
        }
        let listing = try await BlockingIO.run { () throws -> Listing in
            var info = stat()
            guard FS.stat(directory, &info) == 0 else { throw FileSystemError.last("open", directory).apiError }
            guard info.st_mode & S_IFMT == S_IFDIR else { throw APIError(.internalServerError, "open \(directory): not a directory") }
            guard let handle = FS.opendir(directory) else { throw FileSystemError.last("open", directory).apiError }
            defer { closedir(handle) }
            var entries: [Entry] = []
            while let entry = readdir(handle) {
                // Names that are not UTF-8 are kept byte for byte (FilePathText).
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in FilePathText.decode(Array(raw.prefix { $0 != 0 })) }
                if name == "." || name == ".." { continue }
                let full = directory == "/" ? "/" + name : directory + "/" + name
                var entryInfo = stat()
                let isDir = FS.lstat(full, &entryInfo) == 0 && entryInfo.st_mode & S_IFMT == S_IFDIR
                entries.append(Entry(name: name, absolutePathString: full, isDir: isDir))
            }
            entries.sort { a, b in
                if a.isDir != b.isDir { return a.isDir }
                return FilePathText.encode(a.name).lexicographicallyPrecedes(FilePathText.encode(b.name))
            }
            let components = PathResolver.components(directory)
            var next: String?
            if paginated {
                if let cursor { entries = entries.filter { Cursor.isAfter($0, cursor) } }
                if entries.count > limit {
                    entries = Array(entries.prefix(limit))
                    next = entries.last.map(Cursor.make)
                }
            }
            return Listing(absolutePath: components, absolutePathString: directory, contents: entries, nextCursor: next)
        }
        return JSONResponse.make(listing)
    }

    /// `{"resolved_path"}`: the cleaned path with its links followed (spec §2).
    func resolvePath(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        var query = StrictQuery(request, allowed: ["path"])
        let path = query.string("path", required: true) ?? ""
        try query.validate()
        try PathInput.rejectNUL(path, field: "path")
        guard PathInput.isAbsolute(path) else { throw APIError(.badRequest, "file path must be absolute: \(goQuote(path))") }
        let resolved = try await BlockingIO.run { () throws -> String in
            do { return try PathResolver.resolve(path) } catch let error as FileSystemError {
                throw APIError(error.code == EACCES || error.code == EPERM ? .forbidden : .internalServerError, error.description)
            }
        }
        return JSONResponse.make(["resolved_path": resolved])
    }
}
