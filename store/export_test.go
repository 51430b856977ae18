package store

// CatChunk is catChunk, for the tests of package store_test that cross it.
const CatChunk = catChunk
