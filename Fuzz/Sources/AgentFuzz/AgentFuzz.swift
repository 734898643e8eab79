import FuzzTargets

#if canImport(Glibc)
import Glibc
#endif

/// The target this run drives, chosen once before the first input.
nonisolated(unsafe) private var selected: FuzzTarget?  // written once in LLVMFuzzerInitialize, before any input

/// libFuzzer calls this once, before any input: FUZZ_TARGET names the target.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<Int32>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Int32 {
    let name = getenv("FUZZ_TARGET").map { String(cString: $0) } ?? ""
    guard let target = FuzzCatalog.target(named: name) else {
        let names = FuzzCatalog.targets.map(\.name).joined(separator: " ")
        let message = "agent-fuzz: set FUZZ_TARGET to one of: \(names)\n"
        _ = message.withCString { write(2, $0, strlen($0)) }
        exit(2)
    }
    selected = target
    return 0
}

/// libFuzzer calls this for every input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    selected?.run(data, size) ?? 0
}
