import AgentCore
import AgentHTTP
import FoundationEssentials
import Hummingbird
import NIOCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `POST /write-file`, `POST /create-directory` and `POST /move-file`. Each records the paths it touched for the request's chat and its ancestors, after
/// success only.
struct WriteRoutes: Sendable {
    let chatPaths: ChatPaths

    /// Streams the raw body into a temporary file beside the target and renames it over the
    /// target: memory holds one body part at a time whatever the size, and a body that fails
    /// mid-way leaves the original as it was.
    func writeFile(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        var query = StrictQuery(request, allowed: ["path", "expected_sha256"])
        let path = query.string("path", required: true) ?? ""
        let expectedText = query.string("expected_sha256")
        try query.validate()
        let expected = try ContentHash.expected(expectedText, field: "expected_sha256", in: "Query parameters have invalid values.")
        try PathInput.rejectNUL(path, field: "path")
        guard PathInput.isAbsolute(path) else { throw APIError(.badRequest, "file path must be absolute: \(goQuote(path))") }
        let writer = try await BlockingIO.run(context) { _ throws -> AtomicWriter in
            let target = try Self.writableTarget(path)
            do { return try AtomicWriter(target: target) } catch let error as FileSystemError { throw error.apiError }
        }
        // The new content's hash, while it stays small enough to hash on every write.
        var hasher: SHA256? = SHA256()
        var written = 0
        // Parts are gathered up to this many bytes per trip to the thread pool (the bound on
        // what a write holds in memory besides NIO's own read buffer).
        let batchBytes = 256 << 10
        var batch = ByteBuffer()
        func flush(_ bytes: ByteBuffer) async throws {
            guard bytes.readableBytes > 0 else { return }
            try await BlockingIO.run(context) { _ in try bytes.withUnsafeReadableBytes { raw in try writer.write(raw) } }
        }
        do {
            for try await part in request.body {
                written += part.readableBytes
                if written > ContentHash.automaticLimit { hasher = nil }
                if hasher != nil { part.withUnsafeReadableBytes { hasher!.update($0) } }
                var part = part
                batch.writeBuffer(&part)
                if batch.readableBytes >= batchBytes {
                    try await flush(batch)
                    batch.clear()
                }
            }
            try await flush(batch)
        } catch let error as FileSystemError {
            writer.abandon()
            throw error.apiError
        } catch let error as APIError {
            writer.abandon()
            throw error
        } catch let error as RequestBodyError {
            // Broken framing or a body cut short: the responder's 400.
            writer.abandon()
            throw error
        } catch {
            writer.abandon()
            throw APIError(.internalServerError, "Failed to read the request body.", detail: "\(error)")
        }
        do {
            try await BlockingIO.run(context) { token throws in
                try CommitLocks.withLocks([writer.target]) { () throws in
                    if let expected {
                        let current = try ContentHash.ofFile(writer.target, token: token)
                        guard current == expected else {
                            writer.abandon()
                            throw ContentHash.Conflict(files: [.init(path: path, currentSHA256: current)])
                        }
                    }
                    try writer.commit()
                }
            }
        } catch let error as FileSystemError {
            throw error.apiError
        } catch let conflict as ContentHash.Conflict {
            return conflict.response
        }
        record(path, context)
        let digest = hasher.map {
            var h = $0; return SHA256.hexString(h.finalize())
        }
        return JSONResponse.make(WriteResponse(message: "Successfully wrote to \(goQuote(path))", sha256: digest))
    }

    /// The write-file answer; `sha256` (the new content's) is there for bodies up to
    /// ``ContentHash/automaticLimit``.
    struct WriteResponse: Encodable, Sendable {
        var message: String
        var sha256: String?
    }

    /// The file a write lands in: symbolic links followed (the link itself stays), the
    /// parents made (0755) as the path names them, never a directory. Parents are made
    /// before links are resolved, as Go's `MkdirAll(filepath.Dir(path))`: a dangling link on
    /// the way is "file exists", not a directory made wherever it points.
    static func writableTarget(_ path: String) throws -> String {
        do throws(FileSystemError) { try FS.makeDirectories(parentDirectory(of: path)) } catch { throw error.makingDirectoriesError }
        let target: String
        do { target = try PathResolver.resolve(path) } catch { throw error.apiError }
        var info = stat()
        if FS.stat(target, &info) == 0, info.st_mode & S_IFMT == S_IFDIR {
            throw APIError(.badRequest, "open \(path): is a directory")
        }
        // Refused before the body is read: a FIFO, socket or device, or a file the agent
        // may not write (checked again at the rename).
        do { _ = try AtomicWriter.checkReplaceable(target) } catch {
            throw FileSystemError(operation: error.operation, path: path, code: error.code).apiError
        }
        return target
    }

    /// `{path, parents?}`: makes the directory (0755); an existing directory is fine.
    func createDirectory(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        let body = try await JSONRequest.decode(request, context: context, typeName: "CreateDirectoryRequest")
        let path = try body.string("path") ?? ""
        let parents = try body.bool("parents") ?? false
        try PathInput.rejectNUL(path, field: "path")
        guard !path.isEmpty else { throw APIError(.badRequest, "\"path\" is required") }
        guard PathInput.isAbsolute(path) else { throw APIError(.badRequest, "file path must be absolute: \(goQuote(path))") }
        try await BlockingIO.run(context) { _ throws in
            var info = stat()
            if FS.stat(path, &info) == 0 {
                guard info.st_mode & S_IFMT == S_IFDIR else { throw APIError(.conflict, "mkdir \(path): file exists") }
                return
            }
            if parents {
                do throws(FileSystemError) { try FS.makeDirectories(path) } catch { throw error.makingDirectoriesError }
            } else if FS.mkdir(path, 0o755) != 0 {
                throw FileSystemError.last("mkdir", path).makingDirectoriesError
            }
        }
        record(PathResolver.clean(path), context)
        return JSONResponse.make(["message": "Successfully created \(goQuote(path))"])
    }

    /// `{source, dest, overwrite?}`: a rename; an existing destination needs `overwrite`, and
    /// a non-empty destination directory is never replaced (409).
    func moveFile(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        let body = try await JSONRequest.decode(request, context: context, typeName: "MoveFileRequest")
        let source = try body.string("source") ?? ""
        let destination = try body.string("dest") ?? ""
        let overwrite = try body.bool("overwrite") ?? false
        try PathInput.rejectNUL(source, field: "source")
        try PathInput.rejectNUL(destination, field: "dest")
        for (field, value) in [("source", source), ("dest", destination)] {
            guard !value.isEmpty else { throw APIError(.badRequest, "\(goQuote(field)) is required") }
            guard PathInput.isAbsolute(value) else { throw APIError(.badRequest, "file path must be absolute: \(goQuote(value))") }
        }
        try await BlockingIO.run(context) { token throws in
            var info = stat()
            guard FS.lstat(source, &info) == 0 else { throw FileSystemError.last("rename", source).apiError }
            var existing = stat()
            if FS.lstat(destination, &existing) == 0 {
                guard overwrite else { throw APIError(.conflict, "rename \(source) \(destination): destination exists") }
                if existing.st_mode & S_IFMT == S_IFDIR,
                    let entries = FS.entries(destination, limit: 1), !entries.isEmpty
                {
                    throw APIError(.conflict, "rename \(source) \(destination): destination is a non-empty directory")
                }
                // Two names of one file (hard links): rename succeeds and changes nothing,
                // leaving the source; the move's effect is the source's name gone. One name
                // reached two ways is left alone, as rename leaves it.
                if existing.st_dev == info.st_dev, existing.st_ino == info.st_ino {
                    if info.st_mode & S_IFMT != S_IFDIR, !Self.sameEntry(source, destination) {
                        guard FS.unlink(source) == 0 else { throw FileSystemError.last("remove", source).apiError }
                    }
                    return
                }
            }
            guard FS.rename(source, destination) == 0 else {
                let code = errno
                if code == EXDEV { return try CrossDeviceMove.move(source, info, to: destination, token: token) }
                let failure = FileSystemError(operation: "rename \(source)", path: destination, code: code)
                switch code {
                // A file's destination named as a directory ("dest/"), or a file where a
                // directory of the destination's path must be: the client's path.
                case ENOTDIR: throw APIError(.badRequest, failure.description)
                case ENOTEMPTY, EEXIST: throw APIError(.conflict, failure.description)
                default: throw failure.apiError
                }
            }
        }
        record(PathResolver.clean(source), context)
        record(PathResolver.clean(destination), context)
        return JSONResponse.make(["message": "Successfully moved \(goQuote(source)) to \(goQuote(destination))"])
    }

    /// Whether two paths name one directory entry: the same name in the same directory
    /// (reached through any links).
    static func sameEntry(_ one: String, _ other: String) -> Bool {
        guard lastPathComponent(of: one) == lastPathComponent(of: other) else { return false }
        var first = stat()
        var second = stat()
        let parents = [parentDirectory(of: one), parentDirectory(of: other)].map { $0.isEmpty ? "/" : $0 }
        guard FS.stat(parents[0], &first) == 0, FS.stat(parents[1], &second) == 0 else { return true }
        return first.st_dev == second.st_dev && first.st_ino == second.st_ino
    }

    /// Records `path` for the request's chat and every ancestor.
    func record(_ path: String, _ context: AgentRequestContext) {
        guard let chat = context.chat else { return }
        for id in [chat.id] + chat.ancestorIDs { chatPaths.record(path, chat: id) }
    }

    /// The errno behind a Foundation file error, if it carries one.
    static func errnoOf(_ error: any Error) -> Int32? {
        let cocoa = error as? CocoaError
        // createDirectory with intermediates accepts existing directories: "exists" means
        // something that is not a directory is in the way.
        if cocoa?.code == .fileWriteFileExists { return ENOTDIR }
        if let code = posixErrno(of: error) { return code }
        switch cocoa?.code {
        case .fileWriteNoPermission, .fileReadNoPermission: return EACCES
        default: return nil
        }
    }
}
