import AgentCore
import AgentHTTP
import FoundationEssentials
import HTTPTypes
import Hummingbird
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// `GET /read-file` and `GET /read-file-lines`.
struct ReadRoutes: Sendable {
    /// Bytes read from disk per step of a streamed read-file body.
    static let chunkBytes = 128 << 10
    /// The whole file's SHA-256 (files up to ``ContentHash/automaticLimit``) and its mtime in
    /// nanoseconds since the epoch (beyond the reference).
    static let hashHeader = HTTPField.Name("Coder-File-Sha256")!
    static let mtimeHeader = HTTPField.Name("Coder-File-Mtime-Unix-Nano")!

    /// Raw bytes from `offset`, at most `limit` (0: to the end), streamed in chunks.
    ///
    /// The file is opened once: its size, mtime and hash are taken from that descriptor and
    /// the body is read from it, so they describe exactly the bytes sent even when the path
    /// is renamed over meanwhile (an editor's atomic save). A file written in place while
    /// the head is prepared is measured again (``maxMeasureAttempts``), then refused with
    /// 503; one written in place while its body streams ends the response short of its
    /// `Content-Length` (the client sees a truncated body, never wrong bytes as whole).
    func readFile(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        let (path, offset, limit) = try Self.readFileQuery(request)
        let head = try await BlockingIO.run(context) { token throws -> ReadHead in
            try Self.measure(path: path, offset: offset, limit: limit, token: token)
        }
        var headers: HTTPFields = [.contentType: Self.contentType(for: path), .contentLength: String(head.length)]
        headers[Self.mtimeHeader] = String(head.mtime)
        if let digest = head.digest { headers[Self.hashHeader] = digest }
        guard head.length > 0 else { return Response(status: .ok, headers: headers, body: .init()) }
        guard let snapshot = head.snapshot else {
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: head.first))
        }
        // The first chunk was read (and the file found unchanged) before the head, so a
        // failure that can still be answered is; the rest comes from the same descriptor.
        let first = head.first
        let length = head.length
        let body = ResponseBody(contentLength: length) { writer in
            try await writer.write(first)
            var position = offset + first.readableBytes
            var left = length - first.readableBytes
            while left > 0 {
                let want = min(left, Self.chunkBytes)
                let at = position
                let chunk = try await BlockingIO.run(context) { _ throws -> ByteBuffer in try snapshot.read(want, at: at) }
                position += chunk.readableBytes
                left -= chunk.readableBytes
                try await writer.write(chunk)
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: headers, body: body)
    }

    /// How many times read-file opens and measures a file that keeps changing in place
    /// before it answers 503.
    static let maxMeasureAttempts = 3

    /// read-file's head phase: opens `path` without blocking (a FIFO, device or socket is
    /// refused at once), measures and hashes it through that descriptor, reads the first
    /// chunk of the window, and checks that the file did not change meanwhile.
    static func measure(path: String, offset: Int, limit: Int, token: CancelToken) throws -> ReadHead {
        for _ in 0..<maxMeasureAttempts {
            let file: RegularFile
            do throws(RegularFile.Failure) { file = try RegularFile(path: path) } catch { throw error.apiError(path) }
            let mtime = ContentHash.mtime(file.info)
            guard file.size > 0, !file.isOnPseudoFileSystem else {
                // Size 0: empty, or a pseudo-file whose size is unknown; or a pseudo-file whose
                // reported size is not its content's (sysfs: 4096). Read what is asked,
                // at most `pseudoFileLimit` bytes, one more to tell whether more is there.
                let want = limit == 0 ? Self.pseudoFileLimit : min(limit, Self.pseudoFileLimit)
                let bytes: [UInt8]
                do {
                    bytes = try file.read(upTo: want + 1, from: offset, path: path, token: token)
                } catch let error as FileSystemError {
                    throw error.apiError  // `/proc/self/mem` at 0: EIO, with its text
                }
                if bytes.count > want, limit == 0 || limit > Self.pseudoFileLimit {
                    throw APIError(
                        .badRequest,
                        "open \(path): the file reports size 0 and holds more than \(Self.pseudoFileLimit) bytes; read it with offset and limit (at most \(Self.pseudoFileLimit) bytes at a time)")
                }
                let inline = bytes.prefix(want)
                return ReadHead(length: inline.count, mtime: mtime, digest: nil, first: ByteBuffer(bytes: inline), snapshot: nil)
            }
            // The whole file's hash, for a later compare-and-swap write (bounded).
            let digest =
                file.size <= ContentHash.automaticLimit
                ? try? file.sha256(limit: ContentHash.automaticLimit, path: path, token: token) : nil
            let snapshot = FileSnapshot(file, path: path)
            let available = max(0, snapshot.size - offset)
            let length = limit == 0 ? available : min(available, limit)
            do {
                let first = try snapshot.read(min(length, chunkBytes), at: offset)
                return ReadHead(length: length, mtime: mtime, digest: digest, first: first, snapshot: length > first.readableBytes ? snapshot : nil)
            } catch is FileSnapshot.Changed {
                continue
            } catch let error as FileSystemError {
                throw error.apiError
            }
        }
        var busy = APIError(
            .serviceUnavailable, "The file changed while it was read.",
            detail: "\(path) was written in place \(maxMeasureAttempts) times while it was measured; read it again")
        busy.headers[.retryAfter] = "1"
        throw busy
    }

    /// read-file's query: an absolute path without NUL, and the byte window (`limit` 0: to
    /// the end); 400 otherwise.
    static func readFileQuery(_ request: Request) throws(APIError) -> (path: String, offset: Int, limit: Int) {
        var query = StrictQuery(request, allowed: ["path", "offset", "limit"])
        let path = query.string("path", required: true) ?? ""
        let offset = query.int("offset", default: 0)
        let limit = query.int("limit", default: 0)
        try query.validate()
        try PathInput.rejectNUL(path, field: "path")
        guard PathInput.isAbsolute(path) else { throw APIError(.badRequest, "file path must be absolute: \(goQuote(path))") }
        return (path, offset, limit)
    }

    /// What the read-file head phase found.
    struct ReadHead: Sendable {
        /// The body's length, its file's mtime and (up to the automatic limit) hash.
        var length: Int
        var mtime: Int64
        var digest: String?
        /// The body's first chunk (a pseudo-file's whole window).
        var first: ByteBuffer
        /// Where the rest of the body is read from; nil when `first` is all of it.
        var snapshot: FileSnapshot?
    }

    /// The most a file reporting size 0 (a pseudo-file under /proc or /sys) is read at once.
    static let pseudoFileLimit = 16 << 20

    /// Line-numbered lines within byte and line budgets; always 200 apart from query errors.
    func readFileLines(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        let (path, limits) = try Self.readFileLinesQuery(request)
        guard PathInput.isAbsolute(path) else { return JSONResponse.make(LinesResponse(error: "file path must be absolute: \(goQuote(path))")) }
        let result = try await BlockingIO.run(context) { token throws -> LinesResponse in
            let file: RegularFile
            do throws(RegularFile.Failure) { file = try RegularFile(path: path) } catch {
                switch error {
                case .notRegular: return LinesResponse(error: "not a file: \(path)")
                case .system(let failure):
                    switch failure.code {
                    case ENOENT, ENOTDIR: return LinesResponse(error: "file does not exist: \(path)")
                    case EACCES, EPERM: return LinesResponse(error: "permission denied: \(path)")
                    default: return LinesResponse(error: "\(failure)")
                    }
                }
            }
            let size = file.size
            var limits = limits
            // The client's max_file_size, capped: the whole file is held in memory.
            limits.maxFileSize = min(limits.maxFileSize, Self.maxLinesFileSize)
            guard size <= limits.maxFileSize else { return Self.tooLarge(size: size, limits: limits) }
            // Read through the descriptor, at most one byte past the limit: a pseudo-file
            // reports size 0 and may never end.
            let data: [UInt8]
            do { data = try file.read(upTo: limits.maxFileSize + 1, path: path, token: token) } catch let error as FileSystemError {
                return LinesResponse(error: "\(error)")
            }
            guard data.count <= limits.maxFileSize else { return Self.tooLarge(size: nil, limits: limits) }
            var response = LineWindow.render(data, limits: limits)
            // An empty file's answer is the reference's `{"success":true}`, nothing more.
            if response.success, !data.isEmpty {
                response.sha256 = SHA256.hex(data)
                response.mtimeUnixNano = ContentHash.mtime(file.info)
            }
            return response
        }
        return JSONResponse.make(result)
    }

    /// read-file-lines' query: the path (no NUL; whether it is absolute is answered in the
    /// body) and the window and budgets, with the reference's defaults; 400 otherwise.
    static func readFileLinesQuery(_ request: Request) throws(APIError) -> (path: String, limits: LineWindow.Limits) {
        var query = StrictQuery(
            request, allowed: ["path", "offset", "limit", "max_file_size", "max_line_bytes", "max_response_lines", "max_response_bytes"])
        let path = query.string("path", required: true) ?? ""
        let limits = LineWindow.Limits(
            offset: max(1, query.int("offset", default: 1)), limit: query.int("limit", default: 0),
            maxFileSize: query.int("max_file_size", default: 1 << 20), maxLineBytes: query.int("max_line_bytes", default: 1024),
            maxResponseLines: query.int("max_response_lines", default: 2000), maxResponseBytes: query.int("max_response_bytes", default: 32768))
        try query.validate()
        try PathInput.rejectNUL(path, field: "path")
        return (path, limits)
    }

    /// The largest file read-file-lines reads, whatever `max_file_size` asks (it is held in
    /// memory whole).
    static let maxLinesFileSize = 64 << 20

    /// A file over `max_file_size`: its size when the file system knows it.
    static func tooLarge(size: Int?, limits: LineWindow.Limits) -> LinesResponse {
        let what = size.map { "is \($0) bytes" } ?? "is more than \(limits.maxFileSize) bytes"
        return LinesResponse(
            fileSize: size ?? 0,
            error: "file \(what) which exceeds the maximum of \(limits.maxFileSize) bytes. Use offset and limit with a smaller file, or read-file for raw bytes.")
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

    /// The reference's budget refusals, word for word.
    static func budgetError(_ limit: Int, _ unit: String) -> String {
        "output would exceed \(limit) \(unit). Read less at a time using offset and limit parameters."
    }

    /// Every failure is `{"success":false,"error":…}` alone, as the reference answers.
    static func render(_ bytes: [UInt8], limits: Limits) -> LinesResponse {
        // The reference answers an empty file with `{"success":true}` alone (no line).
        guard !bytes.isEmpty else { return LinesResponse(success: true) }
        // Lines are found as they are needed, never all at once: a file of 64 MiB of
        // newlines would otherwise hold 67 million slices (2 GiB).
        let newline = UInt8(ascii: "\n")
        let total = bytes.reduce(1) { $1 == newline ? $0 + 1 : $0 }
        guard limits.offset <= total else {
            return LinesResponse(error: "offset \(limits.offset) is beyond the file length of \(total) lines")
        }
        let wanted = limits.limit == 0 ? limits.maxResponseLines : limits.limit
        // `wanted` is a client's number (up to Int.max): count what is left, never add to it.
        var start = 0
        for _ in 1..<limits.offset { start = (bytes[start...].firstIndex(of: newline) ?? bytes.count - 1) + 1 }
        let window = sequence(state: (start, min(wanted, total - (limits.offset - 1)))) { state -> ArraySlice<UInt8>? in
            guard state.1 > 0 else { return nil }
            state.1 -= 1
            let end = bytes[state.0...].firstIndex(of: newline) ?? bytes.count
            defer { state.0 = end + 1 }
            return bytes[state.0..<end]
        }
        var content: [UInt8] = []
        var read = 0
        // As the reference, line by line: the byte budget (joiners count) first, then the
        // line budget, so a limit above max_response_lines fails only when the file has
        // more lines than that to give.
        for line in window {
            var numbered = Array("\(limits.offset + read)\t".utf8)
            if line.count > limits.maxLineBytes {
                numbered += line.prefix(limits.maxLineBytes)
                numbered += Array(truncationMarker.utf8)
            } else {
                numbered += line
            }
            let joiner = read > 0 ? 1 : 0
            if content.count + joiner + numbered.count > limits.maxResponseBytes {
                return LinesResponse(error: budgetError(limits.maxResponseBytes, "bytes"))
            }
            if read >= limits.maxResponseLines {
                return LinesResponse(error: budgetError(limits.maxResponseLines, "lines"))
            }
            if joiner == 1 { content.append(UInt8(ascii: "\n")) }
            content += numbered
            read += 1
        }
        return LinesResponse(
            success: true, fileSize: bytes.count, totalLines: total, linesRead: read,
            content: String(decoding: content, as: UTF8.self))
    }
}
