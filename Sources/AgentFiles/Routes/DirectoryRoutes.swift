import AgentCore
import AgentHTTP
import Foundation
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

        enum CodingKeys: String, CodingKey {
            case absolutePath = "absolute_path", absolutePathString = "absolute_path_string", contents
        }
    }

    /// Lists a directory: directories first, then names in byte order; hidden entries
    /// included; `is_dir` from lstat (a link to a directory is not one).
    func listDirectory(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        var query = StrictQuery(request, allowed: ["path"])
        let queryPath = query.string("path")
        try query.validate()
        var request = request
        let bytes = try await request.collectBody(upTo: context.maxUploadSize)
        guard bytes.readableBytes > 0 else { throw APIError(.badRequest, "Request body must be valid JSON.", detail: "empty body") }
        let body = try JSONRequest.parse(bytes.readableBytesView, typeName: "LSRequest")
        let parts = try body.stringArray("path") ?? []
        let relativity = try body.string("relativity") ?? ""
        let directory: String
        if let queryPath {
            guard queryPath.hasPrefix("/") else {
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
            guard stat(directory, &info) == 0 else { throw FileSystemError.last("open", directory).apiError }
            guard info.st_mode & S_IFMT == S_IFDIR else { throw APIError(.internalServerError, "open \(directory): not a directory") }
            guard let handle = opendir(directory) else { throw FileSystemError.last("open", directory).apiError }
            defer { closedir(handle) }
            var entries: [Entry] = []
            while let entry = readdir(handle) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                }
                if name == "." || name == ".." { continue }
                let full = directory == "/" ? "/" + name : directory + "/" + name
                var entryInfo = stat()
                let isDir = lstat(full, &entryInfo) == 0 && entryInfo.st_mode & S_IFMT == S_IFDIR
                entries.append(Entry(name: name, absolutePathString: full, isDir: isDir))
            }
            entries.sort { a, b in
                if a.isDir != b.isDir { return a.isDir }
                return Array(a.name.utf8).lexicographicallyPrecedes(Array(b.name.utf8))
            }
            let components = directory.split(separator: "/").map(String.init)
            return Listing(absolutePath: components, absolutePathString: directory, contents: entries)
        }
        return JSONResponse.make(listing)
    }

    /// `{"resolved_path"}`: the cleaned path with its links followed (spec §2).
    func resolvePath(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        var query = StrictQuery(request, allowed: ["path"])
        let path = query.string("path", required: true) ?? ""
        try query.validate()
        guard path.hasPrefix("/") else { throw APIError(.badRequest, "file path must be absolute: \(goQuote(path))") }
        let resolved = try await BlockingIO.run { () throws -> String in
            do { return try PathResolver.resolve(path) } catch let error as FileSystemError {
                throw APIError(error.code == EACCES || error.code == EPERM ? .forbidden : .internalServerError, error.description)
            }
        }
        return JSONResponse.make(["resolved_path": resolved])
    }
}
