//===- Monarch.h - Everything a controller program needs --------*- C++ -*-===//
#ifndef MONARCH_RUNTIME_MONARCH_H
#define MONARCH_RUNTIME_MONARCH_H

#include "monarch/runtime/actor/Actor.h"
#include "monarch/runtime/actor/Future.h"
#include "monarch/runtime/actor/Value.h"
#include "monarch/runtime/actor/ValueMesh.h"
#include "monarch/runtime/proc/ActorMesh.h"
#include "monarch/runtime/proc/Host.h"
#include "monarch/runtime/proc/Port.h"
#include "monarch/runtime/proc/ProcMesh.h"
#include "monarch/runtime/proc/Runtime.h"
#include "monarch/runtime/supervision/Supervision.h"

#endif // MONARCH_RUNTIME_MONARCH_H
