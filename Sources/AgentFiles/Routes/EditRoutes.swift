import AgentCore
import AgentHTTP
import FoundationEssentials
import HTTPTypes
import Hummingbird
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `POST /edit-files`: every file validated and edited in memory first;
/// nothing is written unless every edit applies. Beyond the reference, the writes are
/// all-or-nothing on disk too: if writing a later file fails, the files already written are
/// put back as they were.
struct EditRoutes: Sendable {
    let writes: WriteRoutes

    struct FileEdits {
        var path: String
        var target: String
        var edits: [EditEngine.Edit]
        /// The content hash the client last saw (compare-and-swap), if it sent one.
        var expected: String?
    }

    /// One file's result: its diff (with `include_diff`) and its new hash.
    struct FileDiff: Encodable, Sendable {
        var path: String
        var diff: String?
        /// Beyond the reference: true when the diff stops short (``maxDiffBytes``).
        var diffTruncated: Bool?
        var sha256: String

        enum CodingKeys: String, CodingKey {
            case path, diff, sha256
            case diffTruncated = "diff_truncated"
        }
    }

    /// The diffs of one request, all files together, at most about this many bytes: the
    /// rest of a diff past it is left out (`diff_truncated`), so a whole-file change of a
    /// large file costs what is shown, not gigabytes of lines and JSON.
    static let maxDiffBytes = 4 << 20

    struct Requested {
        var path: String
        var edits: [EditEngine.Edit]
        var expected: String?
    }

    func editFiles(_ request: Request, _ context: AgentRequestContext) async throws -> Response {
        let body = try await JSONRequest.decode(request, context: context, typeName: "FileEditRequest")
        let includeDiff = try body.bool("include_diff") ?? false
        let requested = try Self.parseFiles(body)
        guard !requested.isEmpty else { throw APIError(.badRequest, "must specify at least one file") }

        let results: [FileDiff]
        do {
            // Bounded CPU time, and stopped when the client leaves (matching and diffs check).
            results = try await BlockingIO.run(context, budget: Self.cpuBudget) { token throws -> [FileDiff] in
                try Self.apply(requested, includeDiff: includeDiff, token: token)
            }
        } catch let conflict as ContentHash.Conflict {
            return conflict.response
        }
        for file in requested { writes.record(file.path, context) }
        if includeDiff {
            return JSONResponse.make(["files": results])
        }
        return JSONResponse.make(EditedResponse(files: results.map { FileDiff(path: $0.path, sha256: $0.sha256) }))
    }

    /// Without `include_diff`: the reference's message, and each file's new hash.
    struct EditedResponse: Encodable, Sendable {
        var message = "Successfully edited file(s)"
        var files: [FileDiff]
    }

    /// The request's files and edits (`old_text`/`new_text`, or the older `search`/`replace`).
    static func parseFiles(_ body: JSONRequest) throws(APIError) -> [Requested] {
        guard let value = body.value("files") else { return [] }
        guard case .array(let items) = value else {
            throw APIError(.badRequest, "Request body must be valid JSON.", detail: "json: cannot unmarshal \(value.goKind) into Go struct field FileEditRequest.files of type []workspacesdk.FileEdits")
        }
        var files: [Requested] = []
        // Nested objects are named as Go's decoder names them in a type error: the innermost
        // struct, then the field path from the body's root (`FileEdit.files.edits.old_text`).
        for (index, item) in items.enumerated() {
            // Each file must be an object (null is an empty one, as in Go).
            if case .object = item {} else if item != .null { throw body.mismatch("files", item, "workspacesdk.FileEdits") }
            let file = try JSONRequest.parse(Array("{}".utf8), typeName: "FileEdits.files").with(item)
            let path = try file.string("path") ?? ""
            try PathInput.rejectNUL(path, field: "path")
            var edits: [EditEngine.Edit] = []
            let editsValue = file.value("edits")
            if let editsValue, editsValue != .null {
                guard case .array = editsValue else { throw file.mismatch("edits", editsValue, "[]workspacesdk.FileEdit") }
            }
            if case .array(let editItems)? = editsValue {
                for editItem in editItems {
                    if case .object = editItem {} else if editItem != .null { throw file.mismatch("edits", editItem, "workspacesdk.FileEdit") }
                    let edit = try JSONRequest.parse(Array("{}".utf8), typeName: "FileEdit.files.edits").with(editItem)
                    let oldText = try edit.string("old_text") ?? ""
                    let newText = try edit.string("new_text") ?? ""
                    let search = oldText.isEmpty && newText.isEmpty ? try edit.string("search") ?? "" : oldText
                    let replace = oldText.isEmpty && newText.isEmpty ? try edit.string("replace") ?? "" : newText
                    edits.append(
                        EditEngine.Edit(
                            search: Array(search.utf8), replacement: Array(replace.utf8), replaceAll: try edit.bool("replace_all") ?? false))
                }
            }
            let expected = try ContentHash.expected(
                try file.string("expected_sha256"), field: "files[\(index)].expected_sha256", in: "Request body has invalid values.")
            files.append(Requested(path: path, edits: edits, expected: expected))
        }
        return files
    }

    /// How long one edit-files request may work (matching, diffs) before it is refused with
    /// 422; matching is near-linear, so only pathological requests come near it.
    static let cpuBudget = Duration.seconds(20)
    /// The largest file an edit reads (it is held in memory with its edited copy).
    static let maxFileBytes = 64 << 20
    /// The most one request holds of all its files and their edited copies: once past it the
    /// request is refused (413) before more files are read (so it holds at most this plus
    /// one file and its copy).
    static let maxTotalBytes = 256 << 20

    /// Validates, edits in memory, then writes; returns per-file diffs in request order.
    /// `maxTotal`: ``maxTotalBytes`` (tests give a smaller one).
    static func apply(
        _ requested: [Requested], includeDiff: Bool = true, token: CancelToken = CancelToken(), maxTotal: Int = maxTotalBytes
    ) throws -> [FileDiff] {
        var problems: [(HTTPResponse.Status, String)] = []
        var merged: [FileEdits] = []
        var byClean: [String: Int] = [:]
        var byTarget: [String: String] = [:]
        for item in requested {
            let (path, edits) = (item.path, item.edits)
            guard !path.isEmpty else { problems.append((.badRequest, "\"path\" is required")); continue }
            guard PathInput.isAbsolute(path) else { problems.append((.badRequest, "file path must be absolute: \(goQuote(path))")); continue }
            guard !edits.isEmpty else { problems.append((.badRequest, "\(path): must specify at least one edit")); continue }
            let clean = PathResolver.clean(path)
            if let index = byClean[clean] {
                // The same file named twice: its edits run in request order.
                merged[index].edits += edits
                continue
            }
            let target: String
            do { target = try PathResolver.resolve(path) } catch {
                problems.append((error.status, error.description))
                continue
            }
            if let other = byTarget[target] {
                problems.append((.badRequest, "\(path) aliases \(other): both name \(target)"))
                continue
            }
            byTarget[target] = path
            byClean[clean] = merged.count
            merged.append(FileEdits(path: path, target: target, edits: edits, expected: item.expected))
        }
        // Phase 1: read and edit everything in memory.
        var conflicts: [ContentHash.ConflictEntry] = []
        var originals: [[UInt8]] = []
        var edited: [[UInt8]] = []
        var held = 0
        for file in merged {
            guard held <= maxTotal else {
                problems.append((.contentTooLarge, "the files edited hold more than \(maxTotal) bytes with their edits, the most one request holds"))
                break
            }
            // Opened without blocking and checked on the descriptor; read with a bound (a
            // pseudo-file reports size 0 and may never end).
            let data: [UInt8]
            do {
                let handle = try RegularFile(path: file.target)
                data = try handle.read(upTo: maxFileBytes + 1, path: file.path, token: token)
            } catch let failure as RegularFile.Failure {
                switch failure {
                case .system(let error):
                    let shown = FileSystemError(operation: "open", path: file.path, code: error.code)
                    problems.append((shown.status, shown.description))
                case .notRegular:
                    problems.append((.badRequest, "open \(file.path): not a file"))
                }
                originals.append([]); edited.append([])
                continue
            }
            guard data.count <= maxFileBytes else {
                problems.append((.badRequest, "\(file.path): file is larger than \(maxFileBytes) bytes, the most an edit reads"))
                originals.append([]); edited.append([])
                continue
            }
            let original = data
            if let expected = file.expected, case let current = SHA256.hex(original), current != expected {
                conflicts.append(.init(path: file.path, currentSHA256: current))
            }
            var content = original
            for edit in file.edits {
                do { content = try EditEngine.apply(edit, to: content, path: file.path, token: token) } catch let error as EditEngine.Failure {
                    problems.append((.badRequest, error.message))
                    break
                }
            }
            originals.append(original)
            edited.append(content)
            held += original.count + content.count
        }
        if !conflicts.isEmpty, problems.isEmpty { throw ContentHash.Conflict(files: conflicts) }
        if !problems.isEmpty {
            // Messages joined by newlines; the status is the highest one seen.
            let status = problems.map(\.0).max { $0.code < $1.code } ?? .badRequest
            throw APIError(status, problems.map(\.1).joined(separator: "\n"))
        }
        // Phase 2: write each file atomically, in request order; on a failure, put back
        // the ones already written.
        // Under the commit lock, each file must still be what phase 1 read: a change
        // meanwhile is a conflict, not something to overwrite.
        try CommitLocks.withLocks(merged.map(\.target)) { () throws in
            var written: [Int] = []
            func rollBack() { for done in written.reversed() { try? write(originals[done], to: merged[done].target) } }
            for (index, file) in merged.enumerated() where edited[index] != originals[index] {
                // A file that changed is a conflict; the budget running out or a cancel while
                // it is read again is that, not a conflict.
                let unchanged: Bool
                do {
                    unchanged = try ContentHash.isUnchanged(file.target, from: originals[index], token: token)
                } catch let error as FileSystemError {
                    rollBack()
                    throw error.apiError
                } catch {
                    rollBack()
                    throw error
                }
                guard unchanged else {
                    rollBack()
                    let current = (try? ContentHash.ofFile(file.target, token: token)) ?? ""
                    throw ContentHash.Conflict(
                        detail: "The file was written by someone else while this edit was being made; nothing was written. Read it again and retry.",
                        files: [.init(path: file.path, currentSHA256: current)])
                }
                do {
                    try write(edited[index], to: file.target)
                    written.append(index)
                } catch let error as FileSystemError {
                    rollBack()
                    throw error.apiError
                }
            }
        }
        // The files are written: the diffs below are bounded by size, never refused.
        var room = maxDiffBytes
        return merged.enumerated().map { index, file in
            var result = FileDiff(path: file.path, diff: nil, sha256: SHA256.hex(edited[index]))
            if includeDiff {
                let diff = UnifiedDiff.make(path: file.path, old: originals[index], new: edited[index], limit: max(room, 0))
                room -= diff.text.utf8.count
                result.diff = diff.text
                result.diffTruncated = diff.truncated ? true : nil
            }
            return result
        }
    }

    static func write(_ bytes: [UInt8], to target: String) throws(FileSystemError) {
        let writer = try AtomicWriter(target: target)
        do {
            try bytes.withUnsafeBytes { raw in try writer.write(raw) }
            try writer.commit()
        } catch let error as FileSystemError {
            writer.abandon()
            throw error
        } catch {
            writer.abandon()
            throw FileSystemError(operation: "write", path: target, code: EIO)
        }
    }
}
