// What the page holds: the stores, the browsed node, the running query, the ops, the
// completion list. One object, shared by the modules (and reachable as `window.state`).

export const state = {
  stores: [],
  store: "",
  node: [], // the browsed node's names, from the top
  childrenNext: null,
  childrenPage: 50, // children per call of the tree browser
  query: null, // {controller, started, rows, columns, ...} of the running or last query
  ops: [],
  completion: { items: [], index: -1, input: null, seq: 0, timer: 0 },
};
