import AgentCore
import AgentHTTP
import FoundationEssentials
import HTTPTypes
import Hummingbird
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// `GET /read-file` and `GET /read-file-lines` (spec file-api §1).
struct ReadRoutes: Sendable {
    /// Bytes read from disk per step of a streamed read-file body.
    static let chunkBytes = 128 << 10
    /// The whole file's SHA-256 (files up to ``ContentHash/automaticLimit``) and its mtime in
    /// nanoseconds since the epoch (beyond the reference).
    static let hashHeader = HTTPField.Name("Coder-File-Sha256")!
    static let mtimeHeader = HTTPField.Name("Coder-File-Mtime-Unix-Nano")!

    /// Raw bytes from `offset`, at most `limit` (0: to the end), streamed in chunks.
    func readFile(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        var query = StrictQuery(request, allowed: ["path", "offset", "limit"])
        let path = query.string("path", required: true) ?? ""
        let offset = query.int("offset", default: 0)
        let limit = query.int("limit", default: 0)
        try query.validate()
        guard path.hasPrefix("/") else { throw APIError(.badRequest, "file path must be absolute: \(goQuote(path))") }
        let (size, mtime, digest) = try await BlockingIO.run { () throws -> (Int, Int64, String?) in
            var info = stat()
            guard stat(path, &info) == 0 else { throw FileSystemError.last("open", path).apiError }
            guard info.st_mode & S_IFMT == S_IFREG else { throw APIError(.badRequest, "open \(path): not a file") }
            guard access(path, R_OK) == 0 else { throw FileSystemError.last("open", path).apiError }
            let size = Int(info.st_size)
            // The whole file's hash, for a later compare-and-swap write.
            let digest = size <= ContentHash.automaticLimit ? try? ContentHash.ofFile(path) : nil
            return (size, ContentHash.mtime(info), digest)
        }
        let available = max(0, size - offset)
        let length = limit == 0 ? available : min(available, limit)
        var headers: HTTPFields = [.contentType: Self.contentType(for: path), .contentLength: String(length)]
        headers[Self.mtimeHeader] = String(mtime)
        if let digest { headers[Self.hashHeader] = digest }
        guard length > 0 else { return Response(status: .ok, headers: headers, body: .init()) }
        // The file is opened when the body is written, so an abandoned response leaks nothing.
        let body = ResponseBody(contentLength: length) { writer in
            let fd = try await BlockingIO.run { () throws -> Int32 in
                let fd = open(path, O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else { throw FileSystemError.last("open", path) }
                return fd
            }
            defer { close(fd) }
            var position = offset
            var left = length
            while left > 0 {
                let want = min(left, Self.chunkBytes)
                let at = position
                let chunk = try await BlockingIO.run { () throws -> ByteBuffer in
                    var buffer = ByteBuffer()
                    let n = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: want) { raw in
                        max(0, pread(fd, raw.baseAddress, want, off_t(at)))
                    }
                    guard n > 0 else { throw FileSystemError(operation: "read", path: path, code: n == 0 ? EIO : errno) }
                    return buffer
                }
                position += chunk.readableBytes
                left -= chunk.readableBytes
                try await writer.write(chunk)
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: headers, body: body)
    }

    /// Line-numbered lines within byte and line budgets; always 200 apart from query errors.
    func readFileLines(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        var query = StrictQuery(
            request, allowed: ["path", "offset", "limit", "max_file_size", "max_line_bytes", "max_response_lines", "max_response_bytes"])
        let path = query.string("path", required: true) ?? ""
        let limits = LineWindow.Limits(
            offset: max(1, query.int("offset", default: 1)), limit: query.int("limit", default: 0),
            maxFileSize: query.int("max_file_size", default: 1 << 20), maxLineBytes: query.int("max_line_bytes", default: 1024),
            maxResponseLines: query.int("max_response_lines", default: 2000), maxResponseBytes: query.int("max_response_bytes", default: 32768))
        try query.validate()
        guard path.hasPrefix("/") else { return JSONResponse.make(LinesResponse(error: "file path must be absolute: \(goQuote(path))")) }
        let result = await BlockingIO.runReporting { () -> LinesResponse in
            var info = stat()
            guard stat(path, &info) == 0 else {
                switch errno {
                case ENOENT, ENOTDIR: return LinesResponse(error: "file does not exist: \(path)")
                case EACCES, EPERM: return LinesResponse(error: "permission denied: \(path)")
                default: return LinesResponse(error: "\(FileSystemError.last("stat", path))")
                }
            }
            guard info.st_mode & S_IFMT == S_IFREG else { return LinesResponse(error: "not a file: \(path)") }
            let size = Int(info.st_size)
            guard size <= limits.maxFileSize else {
                return LinesResponse(
                    fileSize: size,
                    error: "file is \(size) bytes which exceeds the maximum of \(limits.maxFileSize) bytes. Use offset and limit with a smaller file, or read-file for raw bytes.")
            }
            guard let data = FileManager.default.contents(atPath: path) else {
                return LinesResponse(error: access(path, R_OK) != 0 ? "permission denied: \(path)" : "\(FileSystemError.last("read", path))")
            }
            var response = LineWindow.render(Array(data), limits: limits)
            if response.success {
                response.sha256 = SHA256.hex(data)
                response.mtimeUnixNano = ContentHash.mtime(info)
            }
            return response
        }
        return JSONResponse.make(result)
    }

    /// The type Go's `mime.TypeByExtension` gives the common extensions.
    static func contentType(for path: String) -> String {
        let ext = pathExtension(of: path).lowercased()
        return Self.types[ext] ?? "application/octet-stream"
    }

    static let types: [String: String] = [
        "avif": "image/avif", "css": "text/css; charset=utf-8", "gif": "image/gif", "htm": "text/html; charset=utf-8",
        "html": "text/html; charset=utf-8", "jpeg": "image/jpeg", "jpg": "image/jpeg", "js": "text/javascript; charset=utf-8",
        "json": "application/json", "mjs": "text/javascript; charset=utf-8", "pdf": "application/pdf", "png": "image/png",
        "svg": "image/svg+xml", "wasm": "application/wasm", "webp": "image/webp", "xml": "text/xml; charset=utf-8",
        "txt": "text/plain; charset=utf-8",
    ]
}

/// The read-file-lines answer: every key but `success` is left out when zero or empty.
struct LinesResponse: Encodable, Sendable {
    var success = false
    var fileSize = 0
    var totalLines = 0
    var linesRead = 0
    var content = ""
    var error = ""
    /// Beyond the reference: the whole file's hash and mtime, for compare-and-swap.
    var sha256 = ""
    var mtimeUnixNano: Int64 = 0

    init(success: Bool = false, fileSize: Int = 0, totalLines: Int = 0, linesRead: Int = 0, content: String = "", error: String = "") {
        self.success = success
        self.fileSize = fileSize
        self.totalLines = totalLines
        self.linesRead = linesRead
        self.content = content
        self.error = error
    }

    enum CodingKeys: String, CodingKey {
        case success, fileSize = "file_size", totalLines = "total_lines", linesRead = "lines_read", content, error
        case sha256, mtimeUnixNano = "mtime_unix_nano"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(success, forKey: .success)
        if fileSize != 0 { try container.encode(fileSize, forKey: .fileSize) }
        if totalLines != 0 { try container.encode(totalLines, forKey: .totalLines) }
        if linesRead != 0 { try container.encode(linesRead, forKey: .linesRead) }
        if !content.isEmpty { try container.encode(content, forKey: .content) }
        if !error.isEmpty { try container.encode(error, forKey: .error) }
        if !sha256.isEmpty { try container.encode(sha256, forKey: .sha256) }
        if mtimeUnixNano != 0 { try container.encode(mtimeUnixNano, forKey: .mtimeUnixNano) }
    }
}

/// The line window of read-file-lines: lines split on `\n` (a `\r` stays, a final newline
/// adds an empty last line), each cut at `maxLineBytes` bytes, shown as `<n>\t<line>`.
enum LineWindow {
    struct Limits: Sendable {
        var offset: Int
        var limit: Int
        var maxFileSize: Int
        var maxLineBytes: Int
        var maxResponseLines: Int
        var maxResponseBytes: Int
    }

    static let truncationMarker = "... [truncated]"

    static func render(_ bytes: [UInt8], limits: Limits) -> LinesResponse {
        let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        let total = lines.count
        guard limits.offset <= total else {
            return LinesResponse(fileSize: bytes.count, totalLines: total, error: "offset \(limits.offset) is beyond the file length of \(total) lines")
        }
        let wanted = limits.limit == 0 ? limits.maxResponseLines : limits.limit
        if wanted > limits.maxResponseLines {
            return LinesResponse(
                fileSize: bytes.count, totalLines: total,
                error: "output would exceed \(limits.maxResponseLines) lines. Use offset and limit to read a smaller window.")
        }
        let window = lines[(limits.offset - 1)..<min(total, limits.offset - 1 + wanted)]
        var content: [UInt8] = []
        var number = limits.offset
        for line in window {
            if number > limits.offset { content.append(UInt8(ascii: "\n")) }
            content += Array("\(number)\t".utf8)
            if line.count > limits.maxLineBytes {
                content += line.prefix(limits.maxLineBytes)
                content += Array(truncationMarker.utf8)
            } else {
                content += line
            }
            number += 1
            if content.count > limits.maxResponseBytes {
                return LinesResponse(
                    fileSize: bytes.count, totalLines: total,
                    error: "output would exceed \(limits.maxResponseBytes) bytes. Use offset and limit to read a smaller window.")
            }
        }
        return LinesResponse(
            success: true, fileSize: bytes.count, totalLines: total, linesRead: window.count,
            content: String(decoding: content, as: UTF8.self))
    }
}
