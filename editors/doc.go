// Package editors holds hir's editor support: a TextMate grammar for .hir
// files (textmate/hir.tmLanguage.json) and a minimal VS Code extension
// around it (textmate/package.json, textmate/language-configuration.json);
// README.md says how to install them.
//
// The package has no code of its own. Its tests generate the grammar from
// ir's tables (op names by class, attribute keys and words, dtypes,
// memory types), so it names every op ir has (go test ./editors -update
// writes it again), and run it, with Go's regexp, over every .hir file of
// the repository: every character of a program gets a scope, every op
// name the op scope.
package editors
