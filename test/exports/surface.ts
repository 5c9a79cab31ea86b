/**
 * The public surface of a package, read with the TypeScript compiler API: every export of every entry
 * point of package.json "exports" (the `types` target mapped back to its source under src/), and every
 * project-defined type reachable from them through public signatures (function parameters and returns,
 * classes' non-private members, interface and type-alias members, transitively; inferred types included).
 * Used by test/exports/public-surface.test.ts on the repository and on a small fixture package.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

export interface EntryPoint {
  /** The package subpath: `.`, `./kit`. */
  readonly subpath: string;
  /** The source file the subpath's `types` target is built from. */
  readonly file: string;
}

export interface PublicExport {
  /** As a user writes it: `Processor`, `outbox.enqueue`. */
  readonly name: string;
  readonly subpath: string;
  readonly symbol: ts.Symbol;
  readonly isValue: boolean;
}

/** A project-defined type reached from the public surface that no entry point exports. */
export interface HiddenType {
  readonly name: string;
  readonly file: string;
  /** The first public path that reaches it, e.g. `OutboxRelay.options`. */
  readonly via: string;
}

export interface PublicField {
  readonly field: string;
  readonly hidden: HiddenType[];
}

/** The entry points of package.json "exports", each `./dist/<p>.d.ts` read as `src/<p>.ts`. */
export function entryPoints(root: string): EntryPoint[] {
  const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
    exports: Record<string, string | { types?: string }>;
  };
  const out: EntryPoint[] = [];
  for (const [subpath, target] of Object.entries(pkg.exports)) {
    if (typeof target === 'string') continue; // ./package.json
    const m = /^\.\/dist\/(.+)\.d\.ts$/.exec(target.types ?? '');
    if (m === null) throw new Error(`exports["${subpath}"].types is not ./dist/<path>.d.ts`);
    out.push({ subpath, file: path.join(root, 'src', `${m[1]}.ts`) });
  }
  return out;
}

/** The text of README.md and docs/*.md, per page. */
export function docText(root: string): Map<string, string> {
  const pages = ['README.md'];
  try {
    for (const f of readdirSync(path.join(root, 'docs'))) if (f.endsWith('.md')) pages.push(`docs/${f}`);
  } catch {
    // no docs/ folder: README.md only
  }
  return new Map(pages.map((page) => [page, readFileSync(path.join(root, page), 'utf8')]));
}

const word = (name: string) => new RegExp(`(^|[^\\w$.])${name.replace(/[.$]/g, '\\$&')}(?![\\w$])`, 'm');

/**
 * Whether `name` is named in the docs, as a whole word (case-sensitive). A namespace member (`outbox.enqueue`) counts when written
 * qualified anywhere, or bare in the namespace's own page (docs/outbox.md).
 */
export function isDocumented(name: string, docs: Map<string, string>): boolean {
  const dot = name.indexOf('.');
  if (dot < 0) return [...docs.values()].some((code) => word(name).test(code));
  const [ns, member] = [name.slice(0, dot), name.slice(dot + 1)];
  const qualified = new RegExp(`(^|[^\\w$])${ns}\\.${member}(?![\\w$])`, 'm');
  if ([...docs.values()].some((code) => qualified.test(code))) return true;
  const own = docs.get(`docs/${ns}.md`);
  return own !== undefined && word(member).test(own);
}

/** One program for the entry files of several packages (parsing the libraries once). */
export function programOf(files: string[]): ts.Program {
  return ts.createProgram(files, {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    skipLibCheck: true,
    noEmit: true,
    types: ['node'],
  });
}

export class Surface {
  readonly program: ts.Program;
  readonly checker: ts.TypeChecker;
  readonly exports: PublicExport[] = [];
  readonly #public = new Set<ts.Symbol>();
  readonly #srcDir: string;
  readonly #root: string;

  /** `program` must have been made with the entry files among its roots (see {@link programOf}). */
  constructor(program: ts.Program, root: string, entries: EntryPoint[]) {
    this.#root = root;
    this.#srcDir = path.join(root, 'src') + path.sep;
    this.program = program;
    this.checker = this.program.getTypeChecker();
    for (const e of entries) {
      const sf = this.program.getSourceFile(e.file);
      const mod = sf && this.checker.getSymbolAtLocation(sf);
      if (mod === undefined) throw new Error(`cannot read the module ${e.file}`);
      this.#collect(mod, e.subpath, '');
    }
  }

  #collect(mod: ts.Symbol, subpath: string, prefix: string): void {
    for (const exp of this.checker.getExportsOfModule(mod)) {
      const sym = this.resolve(exp);
      if (sym.flags & ts.SymbolFlags.ValueModule && prefix === '') {
        this.#push(exp.name, subpath, sym, true);
        this.#collect(sym, subpath, `${exp.name}.`);
        continue;
      }
      const isValue = (sym.flags & ts.SymbolFlags.Value) !== 0;
      this.#push(prefix + exp.name, subpath, sym, isValue);
    }
  }

  #push(name: string, subpath: string, symbol: ts.Symbol, isValue: boolean): void {
    this.exports.push({ name, subpath, symbol, isValue });
    this.#public.add(symbol);
  }

  resolve(sym: ts.Symbol): ts.Symbol {
    return sym.flags & ts.SymbolFlags.Alias ? this.checker.getAliasedSymbol(sym) : sym;
  }

  isPublic(sym: ts.Symbol): boolean {
    if (this.#public.has(sym)) return true;
    // a member of an exported enum (`Verdict.APPLY`) is nameable through its enum
    const decl = sym.valueDeclaration;
    if (sym.flags & ts.SymbolFlags.EnumMember && decl && ts.isEnumDeclaration(decl.parent)) {
      const parent = this.checker.getSymbolAtLocation(decl.parent.name);
      return parent !== undefined && this.#public.has(parent);
    }
    return false;
  }

  /** Declared in the project's src/ (not a library, not a type parameter). */
  isProject(sym: ts.Symbol): boolean {
    if (sym.flags & ts.SymbolFlags.TypeParameter) return false;
    return (sym.declarations ?? []).some((d) => this.inProject(d));
  }

  inProject(node: ts.Node): boolean {
    return node.getSourceFile().fileName.startsWith(this.#srcDir);
  }

  where(sym: ts.Symbol): string {
    const d = sym.declarations?.[0];
    return d ? path.relative(this.#root, d.getSourceFile().fileName) : '?';
  }

  /** Every project type reachable from a public signature that no entry point exports. */
  hiddenTypes(): HiddenType[] {
    const walk = new Walk(this, true);
    for (const e of this.exports) walk.symbol(e.symbol, e.name);
    return [...walk.hidden.values()];
  }

  /** Public fields of exported classes whose own type names a project type no entry point exports. */
  exposingFields(): PublicField[] {
    const out: PublicField[] = [];
    for (const e of this.exports) {
      for (const decl of e.symbol.declarations ?? []) {
        if (!ts.isClassDeclaration(decl)) continue;
        for (const [member, typed] of publicFields(decl)) {
          const walk = new Walk(this, false);
          const field = `${e.name}.${member}`;
          if (typed.type) walk.typeNode(typed.type, field);
          else walk.type(this.checker.getTypeAtLocation(typed), field);
          if (walk.hidden.size > 0) out.push({ field, hidden: [...walk.hidden.values()] });
        }
      }
    }
    return out;
  }
}

type Typed = ts.PropertyDeclaration | ts.ParameterDeclaration | ts.GetAccessorDeclaration;

/** Private, `#`, or tagged `@internal` (which tsconfig.build.json's stripInternal leaves out of dist/). */
function isHidden(node: ts.Node): boolean {
  if (ts.getJSDocTags(node).some((t) => t.tagName.text === 'internal')) return true;
  const name = (node as { name?: ts.Node }).name;
  if (name && ts.isPrivateIdentifier(name)) return true;
  const mods = ts.canHaveModifiers(node) ? (ts.getModifiers(node) ?? []) : [];
  return mods.some((m) => m.kind === ts.SyntaxKind.PrivateKeyword);
}

/** A class's fields a user can read: properties, parameter properties and getters not private or `#`. */
function publicFields(cls: ts.ClassDeclaration): Array<[string, Typed & { type?: ts.TypeNode }]> {
  const out: Array<[string, Typed]> = [];
  for (const m of cls.members) {
    if (isHidden(m)) continue;
    if ((ts.isPropertyDeclaration(m) || ts.isGetAccessorDeclaration(m)) && ts.isIdentifier(m.name)) {
      out.push([m.name.text, m]);
    }
    if (ts.isConstructorDeclaration(m)) {
      for (const p of m.parameters) {
        if (ts.isParameterPropertyDeclaration(p, m) && !isHidden(p) && ts.isIdentifier(p.name)) {
          out.push([p.name.text, p]);
        }
      }
    }
  }
  return out;
}

/** One walk over public declarations; `deep` follows referenced project types into their members. */
class Walk {
  readonly hidden = new Map<ts.Symbol, HiddenType>();
  readonly #seenDecl = new Set<ts.Node>();
  readonly #seenType = new Set<ts.Type>();

  constructor(
    readonly s: Surface,
    readonly deep: boolean,
  ) {}

  /** A referenced symbol: flagged when hidden, then its declarations walked (deep walks only). */
  ref(raw: ts.Symbol, via: string): void {
    const sym = this.s.resolve(raw);
    if (!this.s.isProject(sym)) return;
    const isPublic = this.s.isPublic(sym);
    if (!isPublic && !this.hidden.has(sym)) {
      this.hidden.set(sym, { name: sym.name, file: this.s.where(sym), via });
    }
    // a public type is walked from its own name: the path shown starts at the nearest public name
    if (this.deep) this.symbol(sym, isPublic ? sym.name : `${via} > ${sym.name}`);
  }

  symbol(sym: ts.Symbol, via: string): void {
    if (sym.flags & ts.SymbolFlags.ValueModule) return; // a namespace: its members are exports of their own
    for (const d of sym.declarations ?? []) {
      if (this.s.inProject(d)) this.declaration(d, via);
    }
  }

  declaration(d: ts.Node, via: string): void {
    if (this.#seenDecl.has(d)) return;
    this.#seenDecl.add(d);
    if (ts.isClassDeclaration(d) || ts.isInterfaceDeclaration(d) || ts.isClassExpression(d)) {
      for (const tp of d.typeParameters ?? []) this.typeNode(tp, via);
      for (const h of d.heritageClauses ?? []) for (const t of h.types) this.typeNode(t, via);
      for (const m of d.members) {
        if (isHidden(m)) continue;
        const name =
          m.name && ts.isIdentifier(m.name) ? m.name.text : ts.isConstructorDeclaration(m) ? 'new' : '';
        this.member(m, name ? `${via}.${name}` : via);
      }
      return;
    }
    if (ts.isTypeAliasDeclaration(d)) {
      for (const tp of d.typeParameters ?? []) this.typeNode(tp, via);
      this.typeNode(d.type, via);
      return;
    }
    if (ts.isVariableDeclaration(d)) {
      if (d.type) this.typeNode(d.type, via);
      else this.type(this.s.checker.getTypeAtLocation(d.name), via);
      return;
    }
    if (ts.isFunctionDeclaration(d)) this.member(d, via);
  }

  /** A member or function: its parameters, return and type parameters; inferred types when unwritten. */
  member(m: ts.Node, via: string): void {
    if (ts.isConstructorDeclaration(m) || ts.isMethodDeclaration(m) || ts.isFunctionDeclaration(m)) {
      if (ts.isConstructorDeclaration(m) && isHidden(m)) return;
      for (const tp of (m as ts.SignatureDeclarationBase).typeParameters ?? []) this.typeNode(tp, via);
      for (const p of m.parameters) {
        if (p.type) this.typeNode(p.type, via);
        else this.type(this.s.checker.getTypeAtLocation(p), via);
      }
      if (ts.isConstructorDeclaration(m)) return;
      if (m.type) this.typeNode(m.type, via);
      else {
        const sig = this.s.checker.getSignatureFromDeclaration(m as ts.SignatureDeclaration);
        if (sig) this.type(this.s.checker.getReturnTypeOfSignature(sig), via);
      }
      return;
    }
    if (ts.isPropertyDeclaration(m) || ts.isGetAccessorDeclaration(m)) {
      if (m.type) this.typeNode(m.type, via);
      else this.type(this.s.checker.getTypeAtLocation(m), via);
      return;
    }
    if (ts.isSetAccessorDeclaration(m)) {
      for (const p of m.parameters) if (p.type) this.typeNode(p.type, via);
      return;
    }
    // interface members, index and call signatures: their written types
    this.typeNode(m, via);
  }

  /** Every type reference written under `node`. */
  typeNode(node: ts.Node, via: string): void {
    const visit = (n: ts.Node): void => {
      let name: ts.Node | undefined;
      if (ts.isTypeReferenceNode(n)) name = n.typeName;
      else if (ts.isExpressionWithTypeArguments(n)) name = n.expression;
      // `typeof VALUES[number]` names a value only to compute a type: the alias is what users name
      else if (ts.isImportTypeNode(n)) name = n.qualifier;
      while (name && (ts.isQualifiedName(name) || ts.isPropertyAccessExpression(name))) {
        name = ts.isQualifiedName(name) ? name.left : name.expression;
      }
      const sym = name && this.s.checker.getSymbolAtLocation(name);
      if (sym) this.ref(sym, via);
      ts.forEachChild(n, visit);
    };
    visit(node);
  }

  /** An inferred type: named project types are references; anonymous ones are walked through. */
  type(t: ts.Type, via: string): void {
    if (this.#seenType.has(t)) return;
    this.#seenType.add(t);
    const c = this.s.checker;
    if (t.aliasSymbol) {
      this.ref(t.aliasSymbol, via);
      for (const a of t.aliasTypeArguments ?? []) this.type(a, via);
      return;
    }
    if (t.isUnionOrIntersection()) {
      for (const m of t.types) this.type(m, via);
      return;
    }
    const sym = t.getSymbol();
    if (t.flags & ts.TypeFlags.EnumLiteral && sym) {
      this.ref(sym, via);
      return;
    }
    if (!(t.flags & ts.TypeFlags.Object)) return;
    const ref = (t as ts.ObjectType).objectFlags & ts.ObjectFlags.Reference;
    if (ref) for (const a of c.getTypeArguments(t as ts.TypeReference)) this.type(a, via);
    if (sym && !sym.name.startsWith('__')) {
      this.ref(sym, via);
      return;
    }
    for (const p of c.getPropertiesOfType(t)) this.type(c.getTypeOfSymbol(p), `${via}.${p.name}`);
    for (const sig of [...t.getCallSignatures(), ...t.getConstructSignatures()]) {
      for (const p of sig.getParameters()) this.type(c.getTypeOfSymbol(p), via);
      this.type(sig.getReturnType(), via);
    }
  }
}
