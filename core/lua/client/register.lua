-- register: a client's registration, which inspection joins to the owner ids
-- of holders and waiters (an owner id begins with its client's id).
-- (common.lua is prepended: now_ms.)
-- KEYS[1] P:client:{ID}  HASH id, since, host, pid, process, face, version
-- ARGV[1] lease in ms, renewed while the client runs ('0': it closes, so
--         the registration is deleted)
-- ARGV[2] the client id
-- ARGV[3..] the other fields, as field, value pairs (written when absent)
-- returns 1 when written, renewed or deleted; 0 when the key holds something
-- else than this client's registration (someone else's data: left alone)
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'hash' then
  if redis.call('HGET', KEYS[1], 'id') ~= ARGV[2] then
    return 0
  end
elseif kind ~= 'none' then
  return 0
end
if ARGV[1] == '0' then
  redis.call('DEL', KEYS[1])
  return 1
end
if kind == 'none' then
  redis.call('HSET', KEYS[1], 'id', ARGV[2], 'since', string.format('%d', now_ms()), unpack(ARGV, 3))
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
