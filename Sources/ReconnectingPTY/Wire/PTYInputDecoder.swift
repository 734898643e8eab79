import AgentCore

/// One client → agent object after the init: `{"data":"...","height":N,"width":N}` (each
/// optional). `data` goes to the terminal; the terminal is resized (after the data) when
/// both `height` and `width` are non-zero.
public struct PTYInput: Equatable, Sendable {
    public var data: String
    public var height: UInt16
    public var width: UInt16

    public init(data: String = "", height: UInt16 = 0, width: UInt16 = 0) {
        self.data = data
        self.height = height
        self.width = width
    }

    /// The size to set after the data, when the object names one.
    public var size: (rows: UInt16, columns: UInt16)? {
        height != 0 && width != 0 ? (height, width) : nil
    }
}

/// Reads the stream of concatenated JSON objects a client sends after the init, however it is
/// split. A value that is not such an object, or one longer than ``maxObjectBytes``, is an
/// error and ends the attach (Go's decoder stops there too).
///
/// Memory: at most ``maxObjectBytes`` of an unfinished object. Work: each byte is examined
/// once for the object's end, however finely the object is split.
public struct PTYInputDecoder: Sendable {
    /// One object (a paste included) is at most this many bytes.
    public static let maxObjectBytes = 1 << 20

    public struct DecodeError: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    private var pending: [UInt8] = []
    /// The end of the unfinished object, scanned as its bytes come: each byte once.
    private var boundary = JSONValueBoundary()
    private var failed = false
    /// Bytes examined for object boundaries since the start (each at most once; tests).
    private(set) var bytesScanned = 0

    public init() {}

    /// The objects completed by `bytes`, in order; an error after the good ones ends the stream.
    public mutating func feed(_ bytes: some Collection<UInt8>) -> (inputs: [PTYInput], error: DecodeError?) {
        guard !failed else { return ([], DecodeError(description: "the stream already failed")) }
        pending.append(contentsOf: bytes)
        var inputs: [PTYInput] = []
        var start = 0
        while true {
            if !boundary.started {
                while start < pending.count, [0x20, 0x09, 0x0a, 0x0d].contains(pending[start]) { start += 1 }
            }
            let from = start + boundary.consumed
            guard from < pending.count else { break }
            let before = boundary.consumed
            let end = boundary.scan(pending[from...])
            bytesScanned += boundary.consumed - before
            guard let end else {
                if boundary.consumed > Self.maxObjectBytes { return fail(inputs, "an input object longer than \(Self.maxObjectBytes) bytes") }
                break
            }
            guard end <= Self.maxObjectBytes else { return fail(inputs, "an input object longer than \(Self.maxObjectBytes) bytes") }
            switch Self.decode(pending[start..<(start + end)]) {
            case .success(let input): inputs.append(input)
            case .failure(let error): return fail(inputs, error.description)
            }
            start += end
            boundary = JSONValueBoundary()
        }
        pending.removeFirst(start)
        return (inputs, nil)
    }

    private mutating func fail(_ inputs: [PTYInput], _ reason: String) -> (inputs: [PTYInput], error: DecodeError?) {
        failed = true
        pending = []
        return (inputs, DecodeError(description: reason))
    }

    /// One object, as Go's decoder fills `ReconnectingPTYRequest`.
    static func decode(_ bytes: some Collection<UInt8>) -> Result<PTYInput, DecodeError> {
        let value: JSONValue
        do {
            value = try JSONValue.parseFirst(bytes)
        } catch {
            return .failure(DecodeError(description: error.description))
        }
        guard case .object = value else {
            if value == .null { return .success(PTYInput()) }
            return .failure(DecodeError(description: "json: cannot unmarshal \(value.goKind) into Go value of type workspacesdk.ReconnectingPTYRequest"))
        }
        var input = PTYInput()
        do throws(PTYInit.DecodeError) {
            input.data = try PTYInit.string(value, "data") ?? ""
            input.height = try PTYInit.uint16(value, "height") ?? 0
            input.width = try PTYInit.uint16(value, "width") ?? 0
        } catch {
            return .failure(DecodeError(description: error.description))
        }
        return .success(input)
    }
}
