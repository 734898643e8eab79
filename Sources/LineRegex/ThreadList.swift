/// Sparse set of program counters (Briggs & Torczon): O(1) insert, membership and clear.
struct ThreadList {
    let dense: UnsafeMutablePointer<UInt32>
    let sparse: UnsafeMutablePointer<UInt32>
    var count = 0

    init(dense: UnsafeMutablePointer<UInt32>, sparse: UnsafeMutablePointer<UInt32>) {
        self.dense = dense
        self.sparse = sparse
    }

    @inline(__always)
    func contains(_ pc: UInt32) -> Bool {
        let index = Int(sparse[Int(pc)])
        return index < count && dense[index] == pc
    }

    @inline(__always)
    mutating func insert(_ pc: UInt32) {
        sparse[Int(pc)] = UInt32(count)
        dense[count] = pc
        count += 1
    }
}
