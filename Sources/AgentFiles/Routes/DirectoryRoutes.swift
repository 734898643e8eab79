import AgentCore
import AgentHTTP
import FoundationEssentials
import Hummingbird

#if canImport(Glibc)
import Glibc
#endif

/// `POST /list-directory` and `GET /resolve-path`.
struct DirectoryRoutes: Sendable {
    let homeDirectory: String
    /// Listings kept between pages.
    let listings: ListingCache

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

    /// The largest page (`limit` is 1...maxPageSize; a cursor without `limit` asks this many).
    static let maxPageSize = 10_000

    /// A cursor names its kept listing and the last entry of its page by its place in the
    /// listing's order (directories first, then names in byte order): `<listing>.<entry>`,
    /// the entry as hex of `d`/`f` and the name's bytes. When the listing is gone (expired,
    /// dropped for room, another agent), the next page is read again from the directory
    /// and starts after that entry, so an entry present throughout still appears once.
    struct Cursor {
        var listing: String?
        var isDir: Bool
        var name: [UInt8]

        static func make(listing: String?, _ item: ListingCache.Item) -> String {
            let key = [item.isDir ? UInt8(ascii: "d") : UInt8(ascii: "f")] + FilePathText.encode(item.name)
            return (listing.map { $0 + "." } ?? "") + SHA256.hexString(key)
        }

        init?(_ text: String) {
            let parts = text.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count <= 2 else { return nil }
            let digits = Array(parts.last!.utf8)
            guard digits.count >= 2, digits.count % 2 == 0 else { return nil }
            var bytes: [UInt8] = []
            for index in stride(from: 0, to: digits.count, by: 2) {
                guard let byte = UInt8(String(decoding: digits[index...index + 1], as: UTF8.self), radix: 16) else { return nil }
                bytes.append(byte)
            }
            guard let kind = bytes.first, kind == UInt8(ascii: "d") || kind == UInt8(ascii: "f") else { return nil }
            listing = parts.count == 2 ? String(parts[0]) : nil
            isDir = kind == UInt8(ascii: "d")
            name = Array(bytes.dropFirst())
        }

        /// True when `item` comes after the cursor's entry in the listing's order.
        func precedes(_ item: ListingCache.Item) -> Bool {
            if item.isDir != isDir { return !item.isDir }
            return name.lexicographicallyPrecedes(FilePathText.encode(item.name))
        }

        /// Where the page after the cursor starts in `items` (sorted): a binary search.
        func start(in items: [ListingCache.Item]) -> Int {
            var low = 0
            var high = items.count
            while low < high {
                let middle = (low + high) / 2
                if precedes(items[middle]) { high = middle } else { low = middle + 1 }
            }
            return low
        }
    }

    /// Lists a directory: directories first, then names in byte order; hidden entries
    /// included; `is_dir` from lstat (a link to a directory is not one). Paged with `limit`
    /// (1...10 000) and `cursor`: the first page reads the directory and keeps the listing
    /// (``ListingCache``), later pages are cut from it.
    func listDirectory(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        var query = StrictQuery(request, allowed: ["path", "limit", "cursor"])
        let queryPath = query.string("path")
        let pageSize = query.int("limit", default: -1)
        let cursorText = query.string("cursor")
        try query.validate()
        if pageSize != -1, !(1...Self.maxPageSize).contains(pageSize) {
            throw APIError(
                .badRequest, "Query parameters have invalid values.",
                validations: [.init(field: "limit", detail: "Query param \"limit\" must be between 1 and \(Self.maxPageSize)")])
        }
        let cursor = cursorText.flatMap(Cursor.init)
        if cursorText != nil, cursor == nil {
            throw APIError(.badRequest, "Query parameters have invalid values.", validations: [.init(field: "cursor", detail: "not a cursor this agent made")])
        }
        let paginated = pageSize != -1 || cursor != nil
        let limit = pageSize == -1 ? Self.maxPageSize : pageSize
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
        let listings = listings
        let listing = try await BlockingIO.run { () throws -> Listing in
            let items: [ListingCache.Item]
            var kept: String?
            if let cursor, let id = cursor.listing, let found = listings.lookup(id, directory: directory) {
                items = found
                kept = id
            } else {
                items = try listings.read(directory)
            }
            let page: ArraySlice<ListingCache.Item>
            var next: String?
            if paginated {
                let start = cursor?.start(in: items) ?? 0
                page = items[start..<min(items.count, start + limit)]
                if page.endIndex < items.count {
                    if kept == nil { kept = listings.keep(items, directory: directory) }
                    next = Cursor.make(listing: kept, page.last!)
                } else if let kept {
                    listings.drop(kept)
                }
            } else {
                page = items[...]
            }
            let entries = page.map { item in
                Entry(name: item.name, absolutePathString: directory == "/" ? "/" + item.name : directory + "/" + item.name, isDir: item.isDir)
            }
            return Listing(absolutePath: PathResolver.components(directory), absolutePathString: directory, contents: entries, nextCursor: next)
        }
        return JSONResponse.make(listing)
    }

    /// `{"resolved_path"}`: the cleaned path with its links followed.
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
