import AgentCore
import AgentHTTP
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization

/// At-most-once tool calls for write-file and edit-files: a request with
/// the three tool-call headers runs once; a repeat with the same input (method, target and
/// body, by SHA-256) gets the recorded status and body, errors included; other inputs,
/// older messages, canceled calls and calls older than this agent get 409 with a `code`.
struct ToolCallMiddleware: RouterMiddleware {
    typealias Context = AgentRequestContext

    let ledger: ToolCallLedger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let (key, ageMs) = try ToolCallKey.from(request.headers, chat: context.chat) else {
            return try await next(request, context)
        }
        switch ledger.begin(key, ageMs: ageMs) {
        case .stale:
            return refuse(.stale("A newer message of this chat has tool calls; this one is stale."))
        case .canceled:
            return refuse(.canceled("This tool call was canceled."))
        case .agentStartedAfterCall:
            return refuse(.agentStartedAfterCall("The agent started after this tool call was made; it may have run before."))
        case .replay:
            let inputHash = try await Self.drainHash(request)
            guard let record = await ledger.settled(key) else {
                return JSONResponse.make(APIErrorBody(message: "The tool call's record is gone."), status: .internalServerError)
            }
            switch record.state {
            case .done(let answer, let recordedInput):
                guard recordedInput == inputHash else {
                    return refuse(.inputMismatch("This tool call ran with a different input."))
                }
                return replay(answer, record)
            case .canceled:
                return refuse(.canceled("This tool call was canceled."))
            case .running:
                // Only when the waiting task was cancelled.
                return JSONResponse.make(APIErrorBody(message: "Stopped waiting for the tool call."), status: .internalServerError)
            }
        case .run:
            // Every way out records an outcome: a call left running would hold every repeat
            // and cancel waiting for it. One that stopped without an answer (the handler
            // threw, or its body could not be read) counts as run with its input unknown,
            // so a repeat is refused (input_mismatch), never run again.
            let started = ContinuousClock.now
            let hasher = InputHasher(request)
            var answered = false
            defer {
                if !answered { ledger.finish(key, answer: Self.stopped, inputHash: hasher.ended ? hasher.finish() : "incomplete") }
            }
            var hashed = request
            hashed.body = RequestBody(asyncSequence: HashingSequence(base: request.body, hasher: hasher))
            let response: Response
            do {
                response = try await next(hashed, context)
            } catch let error as any HTTPResponseError {
                response = try error.response(from: request, context: context)
            }
            // A body the handler never read (it failed first) still counts toward the input;
            // one it stopped reading part-way cannot be read again, and the input stays
            // unknown (a repeat then gets input_mismatch rather than a wrong replay).
            // A body that cannot be drained (the client went) leaves the input unknown; the
            // answer the handler gave is still the one recorded.
            if !hasher.started {
                do { for try await _ in hashed.body {} } catch {}
            }
            let answer = try await Self.collect(response)
            ledger.finish(key, answer: answer, inputHash: hasher.ended ? hasher.finish() : "incomplete")
            answered = true
            var headers = response.headers
            headers[ToolCallKey.runAgeHeader] = String((ContinuousClock.now - started) / .milliseconds(1))
            return Response(status: answer.status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: answer.body)))
        }
    }

    /// The recorded answer of a call that stopped before it answered.
    static let stopped = ToolCallLedger.Answer(
        status: .internalServerError, contentType: JSONResponse.contentType,
        body: Array(#"{"message":"The tool call stopped before it answered."}"#.utf8))

    private func refuse(_ refusal: ToolCallRefusal) -> Response {
        JSONResponse.make(refusal, status: .conflict)
    }

    private func replay(_ answer: ToolCallLedger.Answer, _ record: ToolCallLedger.Record) -> Response {
        var headers: HTTPFields = [.contentType: answer.contentType]
        headers[ToolCallKey.runAgeHeader] = String((ContinuousClock.now - record.startedAt) / .milliseconds(1))
        return Response(status: answer.status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: answer.body)))
    }

    /// Reads a repeat's body to the end and hashes its input.
    static func drainHash(_ request: Request) async throws -> String {
        let hasher = InputHasher(request)
        for try await part in request.body { hasher.update(part) }
        hasher.markEnded()
        return hasher.finish()
    }

    /// The answer's bytes (the file API answers small JSON; a larger one is not recorded).
    static func collect(_ response: Response) async throws -> ToolCallLedger.Answer {
        let collector = BodyCollector()
        try await response.body.write(collector)
        let contentType = response.headers[.contentType] ?? JSONResponse.contentType
        guard let body = collector.bytes else {
            return .init(
                status: .internalServerError, contentType: JSONResponse.contentType,
                body: Array(#"{"message":"The tool call's answer was too large to record."}"#.utf8))
        }
        return .init(status: response.status, contentType: contentType, body: body)
    }
}

/// SHA-256 over a request's method, path and query, and body.
final class InputHasher: Sendable {
    private struct State {
        var hasher = SHA256()
        var started = false
        var ended = false
    }
    private let state: Mutex<State>

    init(_ request: Request) {
        var initial = State()
        initial.hasher.update(Array("\(request.method.rawValue) \(request.uri.description)\n".utf8))
        state = Mutex(initial)
    }

    func update(_ buffer: ByteBuffer) {
        state.withLock { s in
            s.started = true
            buffer.withUnsafeReadableBytes { s.hasher.update($0) }
        }
    }

    /// The body was read to its end.
    func markEnded() {
        state.withLock {
            $0.started = true; $0.ended = true
        }
    }
    func markStarted() { state.withLock { $0.started = true } }

    var started: Bool { state.withLock { $0.started } }
    var ended: Bool { state.withLock { $0.ended } }

    func finish() -> String {
        state.withLock { s in SHA256.hexString(s.hasher.finalize()) }
    }
}

/// A request body that hashes what passes through.
struct HashingSequence<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable where Base.Element == ByteBuffer {
    typealias Element = ByteBuffer
    let base: Base
    let hasher: InputHasher

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        let hasher: InputHasher

        mutating func next() async throws -> ByteBuffer? {
            hasher.markStarted()
            guard let part = try await base.next() else {
                hasher.markEnded()
                return nil
            }
            hasher.update(part)
            return part
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator(), hasher: hasher)
    }
}

/// Collects a response body up to ``ToolCallLedger/maxRecordedBody`` bytes.
final class BodyCollector: ResponseBodyWriter, @unchecked Sendable {
    // @unchecked: written by the one task that writes the response body, read after.
    private(set) var bytes: [UInt8]? = []

    func write(_ buffer: ByteBuffer) async throws {
        guard var current = bytes else { return }
        current += buffer.readableBytesView
        bytes = current.count > ToolCallLedger.maxRecordedBody ? nil : current
    }

    func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
