// Smoke tests of kubedash with the official JavaScript client, @kubernetes/client-node.
// KUBECONFIG points at a running kubedash (tests/test_js_client.py starts one and runs this
// with `node --test`); each run works in its own namespace.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  KubeConfig, CoordinationV1Api, CoreV1Api, BatchV1Api, Watch, makeInformer,
  PatchStrategy, setHeaderOptions,
} from '@kubernetes/client-node';

const kc = new KubeConfig();
kc.loadFromDefault();
const leases = kc.makeApiClient(CoordinationV1Api);
const core = kc.makeApiClient(CoreV1Api);
const batch = kc.makeApiClient(BatchV1Api);
const namespace = `js-${process.pid}-${Date.now() % 100000}`;
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

const lease = (name, holder = 'node-a', labels = undefined) => ({
  apiVersion: 'coordination.k8s.io/v1', kind: 'Lease',
  metadata: { name, labels },
  spec: { holderIdentity: holder, leaseDurationSeconds: 15 },
});

// Resolves with the first n events a callback sees, or rejects after ms.
function collector(n, ms = 10000) {
  const events = [];
  let resolve;
  const done = new Promise((res, rej) => {
    resolve = res;
    setTimeout(() => rej(new Error(`timed out with ${JSON.stringify(events)}`)), ms).unref();
  });
  return { events, done, push(ev) { events.push(ev); if (events.length === n) resolve(events); } };
}

after(async () => {
  await leases.deleteCollectionNamespacedLease({ namespace }).catch(() => {});
});

test('Lease CRUD: create, read, replace, merge patch, list by label, conflict, delete', async () => {
  const created = await leases.createNamespacedLease({ namespace, body: lease('crud', 'a', { app: 'js' }) });
  assert.ok(created.metadata.uid);
  assert.equal(created.spec.holderIdentity, 'a');
  const read = await leases.readNamespacedLease({ name: 'crud', namespace });
  assert.equal(read.metadata.resourceVersion, created.metadata.resourceVersion);
  read.spec.holderIdentity = 'b';
  const replaced = await leases.replaceNamespacedLease({ name: 'crud', namespace, body: read });
  assert.ok(Number(replaced.metadata.resourceVersion) > Number(created.metadata.resourceVersion));
  await assert.rejects(leases.replaceNamespacedLease({ name: 'crud', namespace, body: read }), (err) => err.code === 409);
  const patched = await leases.patchNamespacedLease(
    { name: 'crud', namespace, body: { spec: { leaseTransitions: 3 } } }, mergePatch);
  assert.equal(patched.spec.leaseTransitions, 3);
  assert.equal(patched.spec.holderIdentity, 'b');
  const listed = await leases.listNamespacedLease({ namespace, labelSelector: 'app=js' });
  assert.deepEqual(listed.items.map((l) => l.metadata.name), ['crud']);
  await leases.deleteNamespacedLease({ name: 'crud', namespace });
  await assert.rejects(leases.readNamespacedLease({ name: 'crud', namespace }), (err) => err.code === 404);
});

test('Endpoints and Job: create, defaults, Job status through /status', async () => {
  const ep = await core.createNamespacedEndpoints({ namespace, body: {
    metadata: { name: 'svc' },
    subsets: [{ addresses: [{ ip: '10.1.0.1' }], ports: [{ name: 'http', port: 80 }] }],
  } });
  assert.equal(ep.subsets[0].ports[0].protocol, 'TCP');
  const job = await batch.createNamespacedJob({ namespace, body: {
    metadata: { name: 'job' },
    spec: { template: { spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'busybox' }] } } },
  } });
  assert.equal(job.spec.completions, 1);
  assert.ok(job.spec.selector.matchLabels['batch.kubernetes.io/controller-uid']);
  const status = await batch.patchNamespacedJobStatus(
    { name: 'job', namespace, body: { metadata: { annotations: { seen: 'yes' } }, status: { active: 1 } } }, mergePatch);
  assert.equal(status.status.active, 1);
  assert.equal(status.metadata.annotations.seen, 'yes');
  await assert.rejects(
    batch.createNamespacedJob({ namespace, body: { metadata: { name: 'bad' }, spec: { template: { spec: { containers: [] } } } } }),
    (err) => err.code === 422);
  await batch.deleteNamespacedJob({ name: 'job', namespace });
  await core.deleteNamespacedEndpoints({ name: 'svc', namespace });
});

test('Watch: ADDED, MODIFIED, DELETED from a resourceVersion', async () => {
  const start = (await leases.listNamespacedLease({ namespace })).metadata.resourceVersion;
  const seen = collector(3);
  const watch = new Watch(kc);
  const controller = await watch.watch(`/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`,
    { resourceVersion: start, allowWatchBookmarks: true },
    (type, obj) => { if (type !== 'BOOKMARK' && obj.metadata.name === 'w') seen.push([type, obj.spec.holderIdentity]); },
    () => {});
  try {
    await leases.createNamespacedLease({ namespace, body: lease('w', 'one') });
    await leases.patchNamespacedLease({ name: 'w', namespace, body: { spec: { holderIdentity: 'two' } } }, mergePatch);
    await leases.deleteNamespacedLease({ name: 'w', namespace });
    assert.deepEqual(await seen.done, [['ADDED', 'one'], ['MODIFIED', 'two'], ['DELETED', 'two']]);
  } finally {
    controller.abort();
  }
});

test('Informer: list then watch, add/update/delete handlers, cache', async () => {
  await leases.createNamespacedLease({ namespace, body: lease('before', 'x', { informer: 'yes' }) });
  const informer = makeInformer(kc, `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`,
    () => leases.listNamespacedLease({ namespace, labelSelector: 'informer=yes' }), 'informer=yes');
  const seen = collector(4);
  informer.on('add', (obj) => seen.push(['add', obj.metadata.name]));
  informer.on('update', (obj) => seen.push(['update', obj.metadata.name]));
  informer.on('delete', (obj) => seen.push(['delete', obj.metadata.name]));
  informer.on('error', (err) => seen.push(['error', String(err)]));
  await informer.start();
  try {
    await leases.createNamespacedLease({ namespace, body: lease('after', 'y', { informer: 'yes' }) });
    await leases.patchNamespacedLease({ name: 'after', namespace, body: { spec: { holderIdentity: 'z' } } }, mergePatch);
    await leases.deleteNamespacedLease({ name: 'before', namespace });
    assert.deepEqual(await seen.done, [['add', 'before'], ['add', 'after'], ['update', 'after'], ['delete', 'before']]);
    assert.deepEqual(informer.list().map((l) => l.metadata.name), ['after']);
  } finally {
    await informer.stop();
  }
});
